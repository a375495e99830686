// "torchneuron/register.h": NEURON_LIBRARY and m.def(name, &shape_fn, "compute_fn").
//
// The signature rules are checked by the compiler: m.def is a template over the shape function's
// type, and every rule is a static_assert whose message names it, so a broken rule is a compile
// error pointing at the user's m.def line. The registrations land in a table that the emulator
// reads through the library's C API (ncc_gpsimd_library_info), never by parsing C++.
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace torchneuron {

constexpr int kMaxFunctions = 10;
constexpr int kMaxArgs = 16;

class Library;

namespace detail {

template <typename T> struct always_false : std::false_type {};

// What a rejected argument type needs so that only its static_assert is reported.
struct RejectedArg {
  static constexpr const char* kind = "invalid";
  using value_type = int;
  using param = int;
  static int get(const ncc_arg&) { return 0; }
};

// One rule per allowed argument type; every other type is a static_assert naming the rule.
template <typename T, typename = void> struct ArgRule : RejectedArg {
  static_assert(always_false<T>::value,
                "NEURON_LIBRARY signature rule: an argument must be torch::Tensor (by value or "
                "reference), torch::Scalar, double or int64_t");
};
template <typename T> struct ArgRule<T, std::enable_if_t<std::is_same<T, float>::value>> : RejectedArg {
  static_assert(always_false<T>::value,
                "NEURON_LIBRARY signature rule: float arguments are not supported, use double");
};
template <typename T> struct ArgRule<T, std::enable_if_t<std::is_same<T, int>::value>> : RejectedArg {
  static_assert(always_false<T>::value,
                "NEURON_LIBRARY signature rule: int arguments are not supported, use int64_t");
};
template <typename T, typename A> struct ArgRule<std::vector<T, A>, void> : RejectedArg {
  static_assert(always_false<T>::value,
                "NEURON_LIBRARY signature rule: std::vector arguments are not supported");
};
template <typename... T> struct ArgRule<std::tuple<T...>, void> : RejectedArg {
  static_assert(always_false<std::tuple<T...>>::value,
                "NEURON_LIBRARY signature rule: std::tuple arguments are not supported");
};

template <> struct ArgRule<torch::Tensor> {
  static constexpr const char* kind = "tensor";
  using value_type = torch::Tensor;
  using param = const torch::Tensor&;
  static torch::Tensor get(const ncc_arg& a) {
    auto impl = torch::make_impl(static_cast<torch::ScalarType>(a.dtype), a.sizes, a.ndim);
    impl->data = a.data;
    impl->has_data = a.data != nullptr;
    return torch::Tensor(impl);
  }
};
template <> struct ArgRule<torch::Scalar> {
  static constexpr const char* kind = "scalar";
  using value_type = torch::Scalar;
  using param = const torch::Scalar&;
  static torch::Scalar get(const ncc_arg& a) {
    return a.kind == 2 ? torch::Scalar(static_cast<int64_t>(a.i)) : torch::Scalar(a.f);
  }
};
template <> struct ArgRule<double> {
  static constexpr const char* kind = "double";
  using value_type = double;
  using param = double;
  static double get(const ncc_arg& a) { return a.kind == 4 || a.kind == 2 ? static_cast<double>(a.i) : a.f; }
};
template <> struct ArgRule<int64_t> {
  static constexpr const char* kind = "int64";
  using value_type = int64_t;
  using param = int64_t;
  static int64_t get(const ncc_arg& a) { return a.kind == 3 || a.kind == 1 ? static_cast<int64_t>(a.f) : a.i; }
};

template <typename A> using Rule = ArgRule<std::remove_cv_t<std::remove_reference_t<A>>>;

using AnyFn = void (*)();
using Invoker = torch::Tensor (*)(AnyFn fn, const ncc_arg* args);

// Calls fn with arguments built from the runner's descriptions; they are lvalues so that
// by-value, const-reference and reference parameters all bind.
template <typename Fn, typename... A, size_t... I>
torch::Tensor invoke_with(Fn fn, const ncc_arg* args, std::index_sequence<I...>) {
  std::tuple<typename Rule<A>::value_type...> values(Rule<A>::get(args[I])...);
  (void)values;
  return fn(std::get<I>(values)...);
}

template <typename... A>
torch::Tensor invoke_shape(AnyFn fn, const ncc_arg* args) {
  auto f = reinterpret_cast<torch::Tensor (*)(A...)>(fn);
  return invoke_with<decltype(f), A...>(f, args, std::index_sequence_for<A...>{});
}

// The compute function is found by name in the built library; Tensor and Scalar have non-trivial
// copies, so by value and by const reference are the same call in the Itanium C++ ABI and the
// compute function is called through this one canonical type.
template <typename... A>
torch::Tensor invoke_compute(AnyFn fn, const ncc_arg* args) {
  auto f = reinterpret_cast<torch::Tensor (*)(typename Rule<A>::param...)>(fn);
  return invoke_with<decltype(f), A...>(f, args, std::index_sequence_for<A...>{});
}

struct OpEntry {
  const char* name;
  const char* compute;
  int nargs;
  const char* kinds[kMaxArgs];
  AnyFn shape_fn;
  Invoker shape_invoke;
  Invoker compute_invoke;
};

struct Registry {
  const char* library = nullptr;
  void (*body)(Library&) = nullptr;
  bool multicore = false;
  size_t stack_size = 0;  // declared with -DSTACK_SIZE; 0 when undeclared
  int libraries = 0;
  bool initialized = false;
  std::vector<OpEntry> ops;
  std::string error;
};

inline Registry& registry() {
  static Registry r;
  return r;
}

constexpr bool name_allowed(const char* s) {
  const char* reserved = "builtin";
  for (int k = 0;; ++k) {
    if (s[k] != reserved[k]) return true;
    if (s[k] == '\0') return false;
  }
}

// A macro's value as text: "1" or "20000" when defined, its own name when not.
#define NCC_STRINGIFY_(x) #x
#define NCC_STRINGIFY(x) NCC_STRINGIFY_(x)

inline size_t parse_size(const char* text) {
  size_t v = 0;
  for (const char* p = text; *p; ++p) {
    if (*p < '0' || *p > '9') return 0;
    v = v * 10 + static_cast<size_t>(*p - '0');
  }
  return v;
}

// Records the library at load time, with the build switches of the TU that holds NEURON_LIBRARY
// (so the runtime's own object is the same for every library and can be built once).
struct LibraryRegistrar {
  LibraryRegistrar(const char* name, void (*body)(Library&), const char* multicore, const char* stack_size) {
    Registry& r = registry();
    if (r.libraries++ > 0) r.error = "more than one NEURON_LIBRARY in one custom-op library";
    r.library = name;
    r.body = body;
    r.multicore = multicore[0] == '1' && multicore[1] == '\0';
    r.stack_size = parse_size(stack_size);
  }
};

}  // namespace detail

class Library {
 public:
  template <typename R, typename... A>
  void def(const char* name, R (*shape_fn)(A...), const char* compute_fn) {
    static_assert(std::is_same<R, torch::Tensor>::value,
                  "NEURON_LIBRARY signature rule: a custom op must return torch::Tensor");
    static_assert(sizeof...(A) <= kMaxArgs, "NEURON_LIBRARY signature rule: at most 16 arguments");
    detail::Registry& r = detail::registry();
    if (static_cast<int>(r.ops.size()) >= kMaxFunctions) {
      r.error = "NEURON_LIBRARY signature rule: at most 10 functions per library";
      return;
    }
    detail::OpEntry e{};
    e.name = name;
    e.compute = compute_fn;
    e.nargs = static_cast<int>(sizeof...(A));
    const char* kinds[] = {detail::Rule<A>::kind..., nullptr};
    for (int k = 0; k < e.nargs; ++k) e.kinds[k] = kinds[k];
    e.shape_fn = reinterpret_cast<detail::AnyFn>(shape_fn);
    e.shape_invoke = &detail::invoke_shape<A...>;
    e.compute_invoke = &detail::invoke_compute<A...>;
    r.ops.push_back(e);
  }
};

}  // namespace torchneuron

#define NEURON_LIBRARY(name, m)                                                                 \
  static_assert(::torchneuron::detail::name_allowed(#name),                                     \
                "NEURON_LIBRARY: the library name 'builtin' is reserved");                      \
  static void ncc_neuron_library_body_##name(::torchneuron::Library& m);                        \
  static const ::torchneuron::detail::LibraryRegistrar ncc_neuron_library_registrar_##name(     \
      #name, &ncc_neuron_library_body_##name, NCC_STRINGIFY(NCC_MULTICORE),                      \
      NCC_STRINGIFY(STACK_SIZE));                                                               \
  static void ncc_neuron_library_body_##name(::torchneuron::Library& m)
