// <torch/torch.h> for the emulated GpSimd engine: the NeuronCore subset of the torch C++ API
// (Tensor, Scalar, dtypes with Half and BFloat16, factories, element-wise ops, accessors, TCM).
//
// It is a self-contained header (no libtorch): shape functions compile against it on the host, and
// compute functions run against it on an emulated core, where every accessor is bounds-checked,
// counted for the cost model and checked for coherence, and TCM is a real 16 KB pool per core.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "neuron/gpsimd_runtime.hpp"

namespace torch {

using ncc_gpsimd::fail;
using ncc_gpsimd::ErrorKind;

// ---------------------------------------------------------------- dtypes
enum class ScalarType : int8_t {
  Byte = 0, Char = 1, Short = 2, Int = 3, Long = 4, Half = 5, Float = 6, BFloat16 = 15,
};
constexpr ScalarType kByte = ScalarType::Byte;
constexpr ScalarType kChar = ScalarType::Char;
constexpr ScalarType kShort = ScalarType::Short;
constexpr ScalarType kInt = ScalarType::Int;
constexpr ScalarType kLong = ScalarType::Long;
constexpr ScalarType kHalf = ScalarType::Half;
constexpr ScalarType kFloat = ScalarType::Float;
constexpr ScalarType kBFloat16 = ScalarType::BFloat16;

inline const char* dtype_name(ScalarType t) {
  switch (t) {
    case kByte: return "Byte";
    case kChar: return "Char";
    case kShort: return "Short";
    case kInt: return "Int";
    case kLong: return "Long";
    case kHalf: return "Half";
    case kFloat: return "Float";
    case kBFloat16: return "BFloat16";
  }
  return "unknown";
}

inline size_t element_size(ScalarType t) {
  switch (t) {
    case kByte: case kChar: return 1;
    case kShort: case kHalf: case kBFloat16: return 2;
    case kInt: case kFloat: return 4;
    case kLong: return 8;
  }
  fail(ErrorKind::kDtype, "unsupported dtype");
}

inline bool is_floating(ScalarType t) { return t == kFloat || t == kHalf || t == kBFloat16; }

// IEEE binary16, stored as bits; arithmetic goes through float.
struct Half {
  uint16_t x = 0;
  Half() = default;
  Half(float f) : x(from_float(f)) {}
  operator float() const { return to_float(x); }
  static uint16_t from_float(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    uint32_t sign = (b >> 16) & 0x8000u;
    uint32_t e = (b >> 23) & 0xffu;
    uint32_t m = b & 0x7fffffu;
    if (e == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (m ? 0x200u : 0u));
    int32_t ne = static_cast<int32_t>(e) - 127 + 15;
    if (ne >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);
    if (ne <= 0) {
      if (ne < -10) return static_cast<uint16_t>(sign);
      m |= 0x800000u;
      uint32_t shift = static_cast<uint32_t>(14 - ne);
      uint32_t hm = m >> shift;
      uint32_t rem = m & ((1u << shift) - 1u);
      uint32_t half = 1u << (shift - 1);
      if (rem > half || (rem == half && (hm & 1u))) ++hm;
      return static_cast<uint16_t>(sign | hm);
    }
    uint32_t hm = m >> 13;
    uint32_t rem = m & 0x1fffu;
    uint32_t out = sign | (static_cast<uint32_t>(ne) << 10) | hm;
    if (rem > 0x1000u || (rem == 0x1000u && (hm & 1u))) ++out;
    return static_cast<uint16_t>(out);
  }
  static float to_float(uint16_t h) {
    uint32_t sign = (h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    uint32_t b;
    if (e == 0x1f) {
      b = sign | 0x7f800000u | (m << 13);
    } else if (e == 0) {
      if (m == 0) {
        b = sign;
      } else {
        int32_t ex = -1;
        do { m <<= 1; ++ex; } while ((m & 0x400u) == 0);
        b = sign | (static_cast<uint32_t>(127 - 15 - ex) << 23) | ((m & 0x3ffu) << 13);
      }
    } else {
      b = sign | ((e - 15 + 127) << 23) | (m << 13);
    }
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  }
};

// bfloat16: the upper half of a float, round-to-nearest-even on conversion.
struct BFloat16 {
  uint16_t x = 0;
  BFloat16() = default;
  BFloat16(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    if ((b & 0x7fffffffu) > 0x7f800000u) {
      x = static_cast<uint16_t>((b >> 16) | 0x40u);
    } else {
      b += 0x7fffu + ((b >> 16) & 1u);
      x = static_cast<uint16_t>(b >> 16);
    }
  }
  operator float() const {
    uint32_t b = static_cast<uint32_t>(x) << 16;
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  }
};

template <typename T> struct CppTypeToScalarType;
template <> struct CppTypeToScalarType<uint8_t> { static constexpr ScalarType value = kByte; };
template <> struct CppTypeToScalarType<int8_t> { static constexpr ScalarType value = kChar; };
template <> struct CppTypeToScalarType<int16_t> { static constexpr ScalarType value = kShort; };
template <> struct CppTypeToScalarType<int32_t> { static constexpr ScalarType value = kInt; };
template <> struct CppTypeToScalarType<int64_t> { static constexpr ScalarType value = kLong; };
template <> struct CppTypeToScalarType<Half> { static constexpr ScalarType value = kHalf; };
template <> struct CppTypeToScalarType<float> { static constexpr ScalarType value = kFloat; };
template <> struct CppTypeToScalarType<BFloat16> { static constexpr ScalarType value = kBFloat16; };

template <typename T> struct TypeTag { using type = T; };

// Calls f(TypeTag<T>{}) with the C++ type of dtype t: one switch per operation, not per element.
template <typename F>
void dispatch(ScalarType t, F&& f) {
  switch (t) {
    case kByte: f(TypeTag<uint8_t>{}); return;
    case kChar: f(TypeTag<int8_t>{}); return;
    case kShort: f(TypeTag<int16_t>{}); return;
    case kInt: f(TypeTag<int32_t>{}); return;
    case kLong: f(TypeTag<int64_t>{}); return;
    case kHalf: f(TypeTag<Half>{}); return;
    case kFloat: f(TypeTag<float>{}); return;
    case kBFloat16: f(TypeTag<BFloat16>{}); return;
  }
  fail(ErrorKind::kDtype, "unsupported dtype");
}

// ---------------------------------------------------------------- Scalar
class Scalar {
 public:
  Scalar() : Scalar(int64_t(0)) {}
  Scalar(double v) : is_int_(false), d_(v), i_(0) {}
  Scalar(float v) : Scalar(static_cast<double>(v)) {}
  Scalar(int v) : Scalar(static_cast<int64_t>(v)) {}
  Scalar(long v) : is_int_(true), d_(0), i_(static_cast<int64_t>(v)) {}
  Scalar(long long v) : is_int_(true), d_(0), i_(static_cast<int64_t>(v)) {}
  Scalar(unsigned long v) : Scalar(static_cast<int64_t>(v)) {}
  Scalar(bool v) : Scalar(static_cast<int64_t>(v)) {}
  // Non-trivial copy: a Scalar is passed by address whether a kernel takes it by value or by
  // const reference (Itanium C++ ABI), which lets the runner call either form.
  Scalar(const Scalar& o) : is_int_(o.is_int_), d_(o.d_), i_(o.i_) {}
  Scalar& operator=(const Scalar& o) {
    is_int_ = o.is_int_; d_ = o.d_; i_ = o.i_;
    return *this;
  }
  ~Scalar() {}
  bool isIntegral(bool = false) const { return is_int_; }
  bool isFloatingPoint() const { return !is_int_; }
  double toDouble() const { return is_int_ ? static_cast<double>(i_) : d_; }
  float toFloat() const { return static_cast<float>(toDouble()); }
  int64_t toLong() const { return is_int_ ? i_ : static_cast<int64_t>(d_); }
  int32_t toInt() const { return static_cast<int32_t>(toLong()); }
  template <typename T> T to() const {
    if (std::is_integral<T>::value) return static_cast<T>(toLong());
    return static_cast<T>(static_cast<float>(toDouble()));
  }

 private:
  bool is_int_;
  double d_;
  int64_t i_;
};

// ---------------------------------------------------------------- sizes and options
// One size: converts implicitly from any integer type so that {n} with a size_t n works.
struct SizeValue {
  int64_t v;
  template <typename I, typename = typename std::enable_if<std::is_integral<I>::value>::type>
  SizeValue(I x) : v(static_cast<int64_t>(x)) {}
};

// A list of at most 8 sizes held by value (the device API never needs more).
class IntArrayRef {
 public:
  IntArrayRef() = default;
  IntArrayRef(std::initializer_list<SizeValue> l) {
    for (const SizeValue& s : l) push(s.v);
  }
  IntArrayRef(const std::vector<int64_t>& v) {
    for (int64_t s : v) push(s);
  }
  IntArrayRef(const int64_t* p, size_t n) {
    for (size_t k = 0; k < n; ++k) push(p[k]);
  }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t operator[](size_t k) const { return v_[k]; }
  const int64_t* data() const { return v_; }
  const int64_t* begin() const { return v_; }
  const int64_t* end() const { return v_ + n_; }
  std::vector<int64_t> vec() const { return std::vector<int64_t>(v_, v_ + n_); }
  bool operator==(const IntArrayRef& o) const {
    return n_ == o.n_ && std::equal(v_, v_ + n_, o.v_);
  }
  bool operator!=(const IntArrayRef& o) const { return !(*this == o); }

 private:
  void push(int64_t s) {
    if (n_ == 8) fail(ErrorKind::kUsage, "tensors have at most 8 dimensions");
    v_[n_++] = s;
  }
  int64_t v_[8] = {0};
  size_t n_ = 0;
};

class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions(ScalarType t) : dtype_(t), has_dtype_(true) {}
  TensorOptions dtype(ScalarType t) const {
    TensorOptions o(*this);
    o.dtype_ = t;
    o.has_dtype_ = true;
    return o;
  }
  ScalarType dtype() const {
    if (!has_dtype_) fail(ErrorKind::kUsage, "tensor factories need a dtype in their TensorOptions");
    return dtype_;
  }

 private:
  ScalarType dtype_ = kFloat;
  bool has_dtype_ = false;
};
inline TensorOptions dtype(ScalarType t) { return TensorOptions(t); }

// ---------------------------------------------------------------- Tensor storage
struct TensorImpl {
  ScalarType dtype = kFloat;
  int ndim = 0;
  int64_t sizes[8] = {0};
  int64_t strides[8] = {0};
  int64_t numel = 1;
  void* data = nullptr;
  bool owns = false;
  bool has_data = false;
  int live_element_accessors = 0;
  int open_read_streams = 0;
  int open_write_streams = 0;
  int coherence = -1;  // the tensor's accessor coherence policy; -1: the core's

  ~TensorImpl() {
    if (owns) std::free(data);
  }
};

inline void check_size_limits(const int64_t* sizes, int ndim) {
  bool small = ndim <= 8;
  bool wide = ndim <= 4;
  for (int k = 0; k < ndim; ++k) {
    if (sizes[k] < 0) fail(ErrorKind::kUsage, "negative tensor size");
    if (sizes[k] > 65535) small = false;
    if (sizes[k] > 4294967295LL) wide = false;
  }
  if (!small && !wide) {
    fail(ErrorKind::kUsage,
         "tensor shape out of the device's limits (up to 8 dims of at most 65535, "
         "or up to 4 dims of at most 4294967295)");
  }
}

inline std::shared_ptr<TensorImpl> make_impl(ScalarType t, const int64_t* sizes, int ndim) {
  check_size_limits(sizes, ndim);
  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = t;
  impl->ndim = ndim;
  int64_t n = 1;
  for (int k = ndim - 1; k >= 0; --k) {
    impl->sizes[k] = sizes[k];
    impl->strides[k] = n;
    n *= sizes[k];
  }
  impl->numel = n;
  return impl;
}

class Tensor;
// `read_only` accessors (what a const Tensor gives, as in AWS's API) can not write the tensor:
// writing through one is a compile error.
template <typename T, size_t N, bool read_only = false> class TensorAccessor;
template <typename T> class TensorReadStreamAccessor;
template <typename T> class TensorWriteStreamAccessor;
template <bool read_only> class TensorTcmAccessor;

// The three parts of the message are concatenated (call sites pass constant strings). The
// tensor's own policy (Tensor::set_accessor_coherence_policy) wins over the core's.
NCC_COLD inline void coherence_violation(const TensorImpl& t, const char* a, const char* b = "", const char* c = "") {
  ncc_gpsimd::CoreState& core = ncc_gpsimd::core();
  auto policy = t.coherence >= 0 ? static_cast<ncc_gpsimd::CoherencePolicy>(t.coherence) : core.coherence;
  if (policy == ncc_gpsimd::CoherencePolicy::COHERENT) {
    ncc_gpsimd::failf(ErrorKind::kCoherence,
                      "accessor coherence: %s%s%s (set_accessor_coherence_policy on the tensor, or "
                      "torch::neuron::set_coherence_policy, allows it)", a, b, c);
  }
  if (policy == ncc_gpsimd::CoherencePolicy::INCOHERENT_VERBOSE) {
    ncc_gpsimd::device_printf("[gpsimd warning] op '%s': incoherent accessors: %s%s%s\n", core.op_name, a, b, c);
  }
}

// What a tensor does about potentially incoherent accessor use (AWS's API reference names):
// COHERENT makes it an error, INCOHERENT_VERBOSE a warning in the printf output,
// INCOHERENT_QUIET nothing. Same values as ncc_gpsimd::CoherencePolicy.
struct CoherencyEnforcer {
  enum Policy { COHERENT, INCOHERENT_VERBOSE, INCOHERENT_QUIET };
};

// ---------------------------------------------------------------- Tensor
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  // Non-trivial copy and destructor (shared_ptr): passed by address by value or by reference alike.

  bool defined() const { return impl_ != nullptr; }
  IntArrayRef sizes() const { return IntArrayRef(impl().sizes, static_cast<size_t>(impl().ndim)); }
  int64_t size(int64_t d) const {
    int64_t n = impl().ndim;
    if (d < 0) d += n;
    if (d < 0 || d >= n) fail(ErrorKind::kBounds, "size(): dimension out of range");
    return impl().sizes[d];
  }
  IntArrayRef strides() const { return IntArrayRef(impl().strides, static_cast<size_t>(impl().ndim)); }
  int64_t numel() const { return impl().numel; }
  int64_t dim() const { return impl().ndim; }
  ScalarType scalar_type() const { return impl().dtype; }
  ScalarType dtype() const { return impl().dtype; }
  size_t element_size() const { return torch::element_size(impl().dtype); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }

  // const, as in AWS's API reference: a tensor's handle does not change, its data does.
  Tensor& fill_(const Scalar& v) const;

  // The tensor's accessor coherence policy; until set, the core's
  // (torch::neuron::set_coherence_policy, COHERENT by default).
  CoherencyEnforcer::Policy get_accessor_coherence_policy() const {
    int p = impl().coherence >= 0 ? impl().coherence : static_cast<int>(ncc_gpsimd::core().coherence);
    return static_cast<CoherencyEnforcer::Policy>(p);
  }
  void set_accessor_coherence_policy(CoherencyEnforcer::Policy policy) const {
    if (policy < CoherencyEnforcer::COHERENT || policy > CoherencyEnforcer::INCOHERENT_QUIET) {
      fail(ErrorKind::kUsage, "set_accessor_coherence_policy: not a CoherencyEnforcer::Policy");
    }
    impl().coherence = static_cast<int>(policy);
  }

  // A const tensor (a `const Tensor&` input) gives read-only accessors and no write stream, as
  // AWS's API reference declares them: writing an input is a compile error.
  template <typename T, size_t N> TensorAccessor<T, N, true> accessor() const&;
  template <typename T, size_t N> TensorAccessor<T, N, false> accessor() &;
  template <typename T> TensorReadStreamAccessor<T> read_stream_accessor() const;
  template <typename T> TensorWriteStreamAccessor<T> write_stream_accessor() &;
  template <typename T> TensorWriteStreamAccessor<T> write_stream_accessor() const& {
    static_assert(sizeof(T) == 0, "write_stream_accessor() on a const Tensor: a const Tensor (an input) is read-only");
    return TensorWriteStreamAccessor<T>(nullptr, nullptr);
  }
  TensorTcmAccessor<true> tcm_accessor() const&;
  TensorTcmAccessor<false> tcm_accessor() &;

  // Runtime-internal: the tensor's HBM bytes; fails in shape functions, whose tensors have none.
  void* device_data(const char* why) const {
    if (!impl().has_data) {
      ncc_gpsimd::failf(ErrorKind::kShapeReadsData,
                        "a shape function tried to access tensor data (%s); shape functions get data-less "
                        "tensors: use sizes(), numel() or dim() only", why);
    }
    return impl().data;
  }
  TensorImpl& impl() const {
    if (!impl_) fail(ErrorKind::kUsage, "use of an undefined tensor");
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// ---------------------------------------------------------------- element-wise accessor
// The accessors' per-element paths are forced inline: a kernel's loop then holds the whole
// check, the count and the access, with nothing of the accessor left in memory, and only the
// cold error paths are calls.
#define NCC_HOT inline __attribute__((always_inline))

// Held by the accessor that Tensor::accessor() returns (and its copies): the tensor's count of
// live element-wise accessors, for coherence checks. The rows that operator[] returns hold none.
struct AccessorToken {
  std::shared_ptr<TensorImpl> t;
  explicit AccessorToken(std::shared_ptr<TensorImpl> p) : t(std::move(p)) { ++t->live_element_accessors; }
  ~AccessorToken() { --t->live_element_accessors; }
};

[[noreturn]] NCC_COLD inline void accessor_out_of_range(int64_t i, int64_t size, size_t dims_left) {
  ncc_gpsimd::failf(ErrorKind::kBounds,
                    "element accessor index %lld out of range for a dimension of size %lld "
                    "(%zu dims from the innermost)", static_cast<long long>(i),
                    static_cast<long long>(size), dims_left);
}

// One bounds check: a single unsigned comparison (a negative index wraps to a huge one) that the
// compiler lays out as the untaken branch of a kernel's loop.
NCC_HOT void check_index(int64_t i, int64_t size, size_t dims_left) {
  if (__builtin_expect(static_cast<uint64_t>(i) >= static_cast<uint64_t>(size), 0)) {
    accessor_out_of_range(i, size, dims_left);
  }
}

struct AccessorRow {};  // selects the constructor that operator[] uses for the rows it returns

// Indexes HBM element by element; every element reference is bounds-checked and counted (in the
// translation unit's count, see ncc_gpsimd::take_element_accesses). An accessor holds its sizes and
// strides by value, so that a kernel's loop keeps them in registers; sizes() points into the tensor,
// so a row (a[i]) stays valid as long as the tensor does, as in torch.
template <typename T, size_t N, bool read_only>
class TensorAccessor {
 public:
  using Element = typename std::conditional<read_only, const T, T>::type;
  TensorAccessor(Element* data, const int64_t* sizes, const int64_t* strides,
                 std::shared_ptr<AccessorToken> token = nullptr)
      : data_(data), sizes_(sizes), token_(std::move(token)) {
    for (size_t d = 0; d < N; ++d) {
      size_[d] = sizes[d];
      stride_[d] = strides[d];
    }
  }

  NCC_HOT TensorAccessor<T, N - 1, read_only> operator[](int64_t i) const {
    check_index(i, size_[0], N);
    return TensorAccessor<T, N - 1, read_only>(AccessorRow{}, data_ + i * stride_[0], sizes_ + 1, size_ + 1,
                                               stride_ + 1);
  }
  int64_t size(size_t d) const { return sizes_[d]; }
  IntArrayRef sizes() const { return IntArrayRef(sizes_, N); }

 private:
  friend class TensorAccessor<T, N + 1, read_only>;
  // A row: the remaining dimensions' sizes and strides copied from the accessor it indexes.
  NCC_HOT TensorAccessor(AccessorRow, Element* data, const int64_t* sizes, const int64_t* size, const int64_t* stride)
      : data_(data), sizes_(sizes) {
    for (size_t d = 0; d < N; ++d) {
      size_[d] = size[d];
      stride_[d] = stride[d];
    }
  }
  Element* data_;
  const int64_t* sizes_;
  int64_t size_[N];
  int64_t stride_[N];
  std::shared_ptr<AccessorToken> token_;
};

template <typename T, bool read_only>
class TensorAccessor<T, 1, read_only> {
 public:
  using Element = typename std::conditional<read_only, const T, T>::type;
  TensorAccessor(Element* data, const int64_t* sizes, const int64_t* strides,
                 std::shared_ptr<AccessorToken> token = nullptr)
      : data_(data), size_(sizes[0]), stride_(strides[0]), sizes_(sizes), token_(std::move(token)) {}

  NCC_HOT Element& operator[](int64_t i) const {
    check_index(i, size_, 1);
    ++ncc_gpsimd::tu_element_accesses;
    return data_[i * stride_];
  }
  int64_t size(size_t d) const { return sizes_[d]; }
  IntArrayRef sizes() const { return IntArrayRef(sizes_, 1); }

 private:
  friend class TensorAccessor<T, 2, read_only>;
  NCC_HOT TensorAccessor(AccessorRow, Element* data, const int64_t* sizes, const int64_t* size, const int64_t* stride)
      : data_(data), size_(size[0]), stride_(stride[0]), sizes_(sizes) {}
  Element* data_;
  int64_t size_;
  int64_t stride_;
  const int64_t* sizes_;
  std::shared_ptr<AccessorToken> token_;
};

template <typename T>
inline void check_accessor_type(const Tensor& t, const char* what) {
  if (CppTypeToScalarType<T>::value != t.scalar_type()) {
    ncc_gpsimd::failf(ErrorKind::kDtype, "%s: element type %s does not match the tensor's dtype %s", what,
                      dtype_name(CppTypeToScalarType<T>::value), dtype_name(t.scalar_type()));
  }
}

inline void check_single_core_accessor(const char* what) {
  if (ncc_gpsimd::core().multicore) {
    ncc_gpsimd::failf(ErrorKind::kMulticore, "the %s is not allowed in multicore mode; use tcm_accessor()", what);
  }
}

// The checks and the accessor both overloads of Tensor::accessor() share.
template <typename T, size_t N, bool read_only>
NCC_HOT TensorAccessor<T, N, read_only> make_accessor(const Tensor& t) {
  static_assert(N >= 1 && N <= 8, "accessor<T, N>: N must be between 1 and 8");
  void* d = t.device_data("accessor");
  check_single_core_accessor("element-wise accessor");
  check_accessor_type<T>(t, "accessor");
  if (static_cast<int64_t>(N) != t.dim()) {
    ncc_gpsimd::failf(ErrorKind::kUsage, "accessor<T, %zu>() on a tensor with %lld dims", N,
                      static_cast<long long>(t.dim()));
  }
  TensorImpl& im = t.impl();
  if (im.open_read_streams + im.open_write_streams > 0) {
    coherence_violation(im, "an element-wise accessor was created while a stream accessor on the same tensor is open");
  }
  auto token = std::make_shared<AccessorToken>(t.impl_ptr());
  return TensorAccessor<T, N, read_only>(static_cast<T*>(d), im.sizes, im.strides, std::move(token));
}

template <typename T, size_t N>
NCC_HOT TensorAccessor<T, N, true> Tensor::accessor() const& {
  return make_accessor<T, N, true>(*this);
}

template <typename T, size_t N>
NCC_HOT TensorAccessor<T, N, false> Tensor::accessor() & {
  return make_accessor<T, N, false>(*this);
}

// ---------------------------------------------------------------- stream accessors
// What both stream directions share: a 4 KB TCM buffer from the core's pool, the count of open
// streams on the tensor (for coherence checks), and move-only ownership of both.
//
// The per-element path is a pointer compare and a pointer bump: [cur_, end_) is the part of the
// buffer that read() or write() may use without checking anything else, and reaching end_ takes
// the slow path (refill or flush, and every error). All of it is inline, so the stream's state
// stays in registers across a kernel's loop.
template <typename T>
class StreamBase {
 public:
  StreamBase(const StreamBase&) = delete;
  StreamBase& operator=(const StreamBase&) = delete;

 protected:
  static constexpr size_t kCap = ncc_gpsimd::kStreamBufferBytes / sizeof(T);
  StreamBase(std::shared_ptr<TensorImpl> t, int TensorImpl::*open_count)
      : t_(std::move(t)), open_count_(open_count), n_(static_cast<size_t>(t_->numel)) {
    buf_ = static_cast<T*>(ncc_gpsimd::core().tcm.allocate(ncc_gpsimd::kStreamBufferBytes));
    if (buf_ == nullptr) {
      // Any number of streams work, but only those whose 4 KB buffer fits in the TCM pool (four
      // at most) are fast: the others go to HBM element by element, at the cost of an
      // element-wise accessor, which is how their traffic is counted (see `moved`).
      buf_ = static_cast<T*>(std::malloc(ncc_gpsimd::kStreamBufferBytes));
      if (buf_ == nullptr) fail(ErrorKind::kUsage, "out of host memory for a stream accessor");
      in_tcm_ = false;
    }
    cur_ = end_ = buf_;
    ++((*t_).*open_count_);
  }
  // A moved-from stream is closed: its next read() or write() fails as on a closed stream.
  StreamBase(StreamBase&& o) noexcept
      : t_(std::move(o.t_)), open_count_(o.open_count_), n_(o.n_), buf_(o.buf_), cur_(o.cur_), end_(o.end_),
        open_(o.open_), in_tcm_(o.in_tcm_) {
    o.open_ = false;
    o.n_ = 0;
    o.end_ = o.cur_;
  }
  NCC_HOT void release() {
    if (!open_) return;
    open_ = false;
    n_ = 0;
    --((*t_).*open_count_);
    if (!in_tcm_) {
      std::free(buf_);
    } else if (ncc_gpsimd::tls_core) {
      ncc_gpsimd::tls_core->tcm.release(buf_);
    }
  }
  size_t pos() const { return static_cast<size_t>(cur_ - buf_); }
  // Counts `n` elements moved between HBM and the buffer: as stream traffic through TCM, or as
  // element accesses for a stream beyond the pool (performance "similar to that of a standard
  // tensor accessor", as AWS's reference says).
  void moved(size_t n) const {
    ncc_counters& counters = ncc_gpsimd::core().counters;
    if (in_tcm_) {
      counters.stream_bytes += n * sizeof(T);
    } else {
      counters.element_accesses += n;
    }
  }
  std::shared_ptr<TensorImpl> t_;
  int TensorImpl::*open_count_;
  size_t n_ = 0;
  T* buf_ = nullptr;
  T* cur_ = nullptr;
  T* end_ = nullptr;
  bool open_ = true;
  bool in_tcm_ = true;
};

// Sequential reads through a 4 KB TCM buffer taken from the core's pool.
template <typename T>
class TensorReadStreamAccessor : public StreamBase<T> {
 public:
  TensorReadStreamAccessor(std::shared_ptr<TensorImpl> t, const T* src)
      : StreamBase<T>(std::move(t), &TensorImpl::open_read_streams), src_(src) {}
  TensorReadStreamAccessor(TensorReadStreamAccessor&&) noexcept = default;
  __attribute__((always_inline)) ~TensorReadStreamAccessor() { close(); }

  NCC_HOT T read() {
    if (__builtin_expect(this->cur_ == this->end_, 0)) refill();
    return *this->cur_++;
  }
  // Closes the stream (returns 0, as the API reference's int close()).
  NCC_HOT int close() {
    this->release();
    return 0;
  }

 private:
  NCC_HOT void refill() {
    if (!this->open_) fail(ErrorKind::kUsage, "read() on a closed read stream accessor");
    if (next_ >= this->n_) {
      ncc_gpsimd::failf(ErrorKind::kBounds, "read stream accessor read past the end of the tensor (%zu elements)",
                        this->n_);
    }
    size_t k = this->n_ - next_ < this->kCap ? this->n_ - next_ : this->kCap;
    std::memcpy(this->buf_, src_ + next_, k * sizeof(T));
    next_ += k;
    this->cur_ = this->buf_;
    this->end_ = this->buf_ + k;
    this->moved(k);
  }
  const T* src_ = nullptr;
  size_t next_ = 0;  // elements of the tensor loaded so far
};

// Sequential writes through a 4 KB TCM buffer; flushed when full, on close() and on destruction.
template <typename T>
class TensorWriteStreamAccessor : public StreamBase<T> {
 public:
  TensorWriteStreamAccessor(std::shared_ptr<TensorImpl> t, T* dst)
      : StreamBase<T>(std::move(t), &TensorImpl::open_write_streams), dst_(dst) {
    this->end_ = this->buf_ + window();
  }
  TensorWriteStreamAccessor(TensorWriteStreamAccessor&&) noexcept = default;
  __attribute__((always_inline)) ~TensorWriteStreamAccessor() { close(); }

  NCC_HOT void write(T v) {
    if (__builtin_expect(this->cur_ == this->end_, 0)) next_window();
    *this->cur_++ = v;
  }
  // Flushes and closes the stream (returns 0, as the API reference's int close()).
  NCC_HOT int close() {
    if (!this->open_) return 0;
    flush();
    this->release();
    this->end_ = this->cur_;
    return 0;
  }

 private:
  // Elements the buffer may take before the next flush or the end of the tensor.
  size_t window() const { return this->n_ - base_ < this->kCap ? this->n_ - base_ : this->kCap; }
  // The buffer is full or the tensor's end (or a closed stream's) is reached.
  NCC_HOT void next_window() {
    if (this->pos() == this->kCap) flush();
    if (base_ + this->pos() >= this->n_) {
      if (!this->open_) fail(ErrorKind::kUsage, "write() on a closed write stream accessor");
      ncc_gpsimd::failf(ErrorKind::kBounds, "write stream accessor wrote past the end of the tensor (%zu elements)",
                        this->n_);
    }
    this->end_ = this->buf_ + window();
  }
  NCC_HOT void flush() {
    size_t n = this->pos();
    if (n == 0) return;
    std::memcpy(dst_ + base_, this->buf_, n * sizeof(T));
    if (ncc_gpsimd::tls_core) this->moved(n);
    base_ += n;
    this->cur_ = this->buf_;
  }
  T* dst_ = nullptr;
  size_t base_ = 0;  // elements of the tensor flushed so far
};

// Checks shared by both stream directions; `conflicting` counts the open streams that clash.
template <typename T>
void* prepare_stream(const Tensor& t, const char* what, int conflicting) {
  void* d = t.device_data(what);
  check_single_core_accessor(what);
  check_accessor_type<T>(t, what);
  if (t.impl().live_element_accessors > 0) {
    coherence_violation(t.impl(), "a ", what, " was created while an element-wise accessor on the same tensor is live");
  } else if (conflicting > 0) {
    coherence_violation(t.impl(), "a ", what,
                        " was created while a conflicting stream accessor on the same tensor is open");
  }
  return d;
}

template <typename T>
NCC_HOT TensorReadStreamAccessor<T> Tensor::read_stream_accessor() const {
  void* d = prepare_stream<T>(*this, "read stream accessor", impl().open_write_streams);
  return TensorReadStreamAccessor<T>(impl_ptr(), static_cast<const T*>(d));
}

template <typename T>
NCC_HOT TensorWriteStreamAccessor<T> Tensor::write_stream_accessor() & {
  void* d = prepare_stream<T>(*this, "write stream accessor", impl().open_read_streams + impl().open_write_streams);
  return TensorWriteStreamAccessor<T>(impl_ptr(), static_cast<T*>(d));
}

// ---------------------------------------------------------------- TCM accessor
// Block copies between a tensor (flattened) and TCM; the fastest path and never coherence-checked.
// A `read_only` one (from a const Tensor) copies only from the tensor.
template <bool read_only>
class TensorTcmAccessor {
 public:
  explicit TensorTcmAccessor(std::shared_ptr<TensorImpl> t, unsigned char* data)
      : t_(std::move(t)), data_(data) {}

  template <typename T>
  void tensor_to_tcm(T* tcm_ptr, size_t offset, size_t n) {
    check<T>(tcm_ptr, offset, n, "tensor_to_tcm");
    std::memcpy(tcm_ptr, data_ + offset * sizeof(T), n * sizeof(T));
    ncc_gpsimd::core().counters.tcm_bytes += n * sizeof(T);
  }
  template <typename T>
  void tcm_to_tensor(T* tcm_ptr, size_t offset, size_t n) {
    static_assert(!read_only && sizeof(T) > 0,
                  "tcm_to_tensor on a read-only TensorTcmAccessor: tcm_accessor() of a const Tensor (an "
                  "input) can not write it");
    check<T>(tcm_ptr, offset, n, "tcm_to_tensor");
    std::memcpy(data_ + offset * sizeof(T), tcm_ptr, n * sizeof(T));
    ncc_gpsimd::core().counters.tcm_bytes += n * sizeof(T);
  }

 private:
  template <typename T>
  void check(T* tcm_ptr, size_t offset, size_t n, const char* what) const {
    if (sizeof(T) != torch::element_size(t_->dtype)) {
      ncc_gpsimd::failf(ErrorKind::kDtype, "%s: element size %zu does not match the tensor's dtype %s", what,
                        sizeof(T), dtype_name(t_->dtype));
    }
    size_t numel = static_cast<size_t>(t_->numel);
    if (offset > numel || n > numel - offset) {
      ncc_gpsimd::failf(ErrorKind::kBounds, "%s: range [%zu, %zu) is outside the tensor's %zu elements", what,
                        offset, offset + n, numel);
    }
    ncc_gpsimd::CoreState& c = ncc_gpsimd::core();
    const unsigned char* p = reinterpret_cast<const unsigned char*>(tcm_ptr);
    bool on_stack = p >= c_stack_lo() && p + n * sizeof(T) <= c_stack_hi();
    if (n > 0 && !on_stack && !c.tcm.contains(tcm_ptr, n * sizeof(T))) {
      ncc_gpsimd::failf(ErrorKind::kTcm,
                        "%s: the TCM range of %zu bytes is not inside one tcm_malloc'd block (or the core's stack)",
                        what, n * sizeof(T));
    }
  }
  static const unsigned char* c_stack_lo();
  static const unsigned char* c_stack_hi();
  std::shared_ptr<TensorImpl> t_;
  unsigned char* data_;
};

inline TensorTcmAccessor<true> Tensor::tcm_accessor() const& {
  return TensorTcmAccessor<true>(impl_ptr(), static_cast<unsigned char*>(device_data("tcm_accessor")));
}

inline TensorTcmAccessor<false> Tensor::tcm_accessor() & {
  return TensorTcmAccessor<false>(impl_ptr(), static_cast<unsigned char*>(device_data("tcm_accessor")));
}

namespace neuron {
inline void* tcm_malloc(size_t nbytes) { return ncc_gpsimd::core().tcm.allocate(nbytes); }
inline void tcm_free(void* p) {
  if (p == nullptr) return;
  size_t size = 0;
  switch (ncc_gpsimd::core().tcm.release(p, &size)) {
    case ncc_gpsimd::TcmPool::Release::kOk:
      return;
    case ncc_gpsimd::TcmPool::Release::kUnknown:
      fail(ErrorKind::kTcm, "tcm_free of a pointer that tcm_malloc did not return");
    case ncc_gpsimd::TcmPool::Release::kOverrun:
      ncc_gpsimd::failf(ErrorKind::kTcm, "TCM buffer overrun: a write past the end of a tcm_malloc'd block of %zu bytes",
                        size);
  }
}
using CoherencePolicy = ncc_gpsimd::CoherencePolicy;
constexpr CoherencePolicy COHERENT = CoherencePolicy::COHERENT;
constexpr CoherencePolicy INCOHERENT_VERBOSE = CoherencePolicy::INCOHERENT_VERBOSE;
constexpr CoherencePolicy INCOHERENT_QUIET = CoherencePolicy::INCOHERENT_QUIET;
inline void set_coherence_policy(CoherencePolicy p) { ncc_gpsimd::core().coherence = p; }
inline CoherencePolicy get_coherence_policy() { return ncc_gpsimd::core().coherence; }
}  // namespace neuron

// ---------------------------------------------------------------- factories
// Allocates device memory for a new tensor; in single-core mode the first tensor that matches the
// operator's output (dtype and shape) is placed straight in the output buffer, saving a copy.
inline Tensor allocate(IntArrayRef size, ScalarType t, bool* zeroed) {
  auto impl = make_impl(t, size.data(), static_cast<int>(size.size()));
  ncc_gpsimd::CoreState& c = ncc_gpsimd::core();
  *zeroed = false;
  if (c.shape_mode) return Tensor(impl);
  size_t nbytes = static_cast<size_t>(impl->numel) * element_size(t);
  const ncc_arg* d = c.dst;
  if (!c.multicore && d != nullptr && !c.dst_taken && static_cast<ScalarType>(d->dtype) == t &&
      d->ndim == impl->ndim && std::equal(d->sizes, d->sizes + d->ndim, impl->sizes)) {
    c.dst_taken = true;
    impl->data = d->data;
  } else {
    impl->data = std::calloc(nbytes ? nbytes : 1, 1);
    if (impl->data == nullptr) fail(ErrorKind::kUsage, "out of device memory");
    impl->owns = true;
    *zeroed = true;
  }
  impl->has_data = true;
  return Tensor(impl);
}

template <typename T>
inline T cast_from_double(double v) {
  return static_cast<T>(static_cast<float>(v));
}

inline Tensor empty(IntArrayRef size, TensorOptions options) {
  bool zeroed;
  return allocate(size, options.dtype(), &zeroed);
}

inline Tensor full(IntArrayRef size, const Scalar& fill_value, TensorOptions options) {
  bool zeroed;
  Tensor t = allocate(size, options.dtype(), &zeroed);
  if (!ncc_gpsimd::core().shape_mode) t.fill_(fill_value);
  return t;
}

inline Tensor zeros(IntArrayRef size, TensorOptions options) {
  bool zeroed;
  Tensor t = allocate(size, options.dtype(), &zeroed);
  if (ncc_gpsimd::core().shape_mode) return t;
  if (zeroed) {
    ncc_gpsimd::core().counters.factory_bytes += t.nbytes();  // the device writes the zeros
  } else {
    t.fill_(0);
  }
  return t;
}

inline Tensor ones(IntArrayRef size, TensorOptions options) { return full(size, 1, options); }

inline Tensor eye(int64_t n, int64_t m, TensorOptions options) {
  Tensor t = zeros({n, m}, options);
  if (ncc_gpsimd::core().shape_mode) return t;
  dispatch(t.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(t.device_data("eye"));
    for (int64_t k = 0; k < n && k < m; ++k) p[k * m + k] = T(1.0f);
  });
  return t;
}
inline Tensor eye(int64_t n, TensorOptions options) { return eye(n, n, options); }

inline Tensor& Tensor::fill_(const Scalar& v) const {
  void* d = device_data("fill_");
  dispatch(scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(d);
    T x = std::is_integral<T>::value ? static_cast<T>(v.toLong()) : cast_from_double<T>(v.toDouble());
    for (int64_t k = 0; k < numel(); ++k) p[k] = x;
  });
  ncc_gpsimd::core().counters.factory_bytes += nbytes();
  return const_cast<Tensor&>(*this);
}

// ---------------------------------------------------------------- element-wise ops
namespace detail {

inline void same_shape(const Tensor& a, const Tensor& b, const char* op) {
  if (a.sizes() != b.sizes()) {
    ncc_gpsimd::failf(ErrorKind::kUsage, "%s: tensors must have the same shape (no broadcasting on the device)", op);
  }
  if (a.scalar_type() != b.scalar_type()) {
    ncc_gpsimd::failf(ErrorKind::kDtype, "%s: tensors must have the same dtype (no type promotion on the device)", op);
  }
}

template <typename T> inline double as_double(T v) { return static_cast<double>(static_cast<float>(v)); }
template <> inline double as_double<float>(float v) { return v; }
template <> inline double as_double<int64_t>(int64_t v) { return static_cast<double>(v); }
template <> inline double as_double<int32_t>(int32_t v) { return v; }

template <typename T> inline T from_double(double v) {
  if (std::is_integral<T>::value) return static_cast<T>(static_cast<int64_t>(v));
  return static_cast<T>(static_cast<float>(v));
}

// out[k] = elem(tag, a[k], k) for every element, with one dtype switch; counts the arithmetic.
template <typename E>
Tensor& map_out(Tensor& out, const Tensor& a, const char* op, E elem) {
  same_shape(out, a, op);
  const void* src = a.device_data(op);
  void* dst = out.device_data(op);
  dispatch(a.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* s = static_cast<const T*>(src);
    T* o = static_cast<T*>(dst);
    for (int64_t k = 0; k < a.numel(); ++k) o[k] = static_cast<T>(elem(tag, s[k], k));
  });
  ncc_gpsimd::core().counters.arith_elements += static_cast<uint64_t>(a.numel());
  return out;
}

// out[i] = f(a[i]) computed in double.
template <typename F>
Tensor& unary_out(Tensor& out, const Tensor& a, const char* op, F f) {
  return map_out(out, a, op, [&](auto tag, auto v, int64_t) {
    using T = typename decltype(tag)::type;
    return from_double<T>(f(as_double<T>(v)));
  });
}

// out[i] = f(a[i], b(i)) where b is a tensor element or a scalar.
template <typename F, typename G>
Tensor& binary_out(Tensor& out, const Tensor& a, const char* op, F f, G b_at) {
  return map_out(out, a, op, [&](auto tag, auto v, int64_t k) {
    using T = typename decltype(tag)::type;
    return from_double<T>(f(as_double<T>(v), b_at(tag, k)));
  });
}

// out[i] = g(a[i], i) in int64 arithmetic; integer dtypes only.
template <typename G>
Tensor& integer_out(Tensor& out, const Tensor& a, const char* op, G g) {
  if (is_floating(a.scalar_type())) {
    ncc_gpsimd::failf(ErrorKind::kDtype, "%s needs an integer dtype, not %s", op, dtype_name(a.scalar_type()));
  }
  return map_out(out, a, op, [&](auto tag, auto v, int64_t k) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral<T>::value) {
      return static_cast<T>(g(static_cast<int64_t>(v), k));
    } else {
      return v;  // not reached: floating dtypes are rejected above
    }
  });
}

inline Tensor like(const Tensor& a) { return empty(a.sizes(), a.scalar_type()); }

// Element k of tensor b as a double (b has a's dtype, checked by same_shape).
inline auto tensor_elem(const Tensor& b, const char* op) {
  const void* p = b.device_data(op);
  return [p](auto tag, int64_t k) {
    using T = typename decltype(tag)::type;
    return as_double<T>(static_cast<const T*>(p)[k]);
  };
}
inline auto scalar_elem(const Scalar& s) {
  double v = s.toDouble();
  return [v](auto, int64_t) { return v; };
}

inline double trunc_if_int(bool integral, double v) { return integral ? std::trunc(v) : v; }

}  // namespace detail

#define NCC_UNARY_OP(name, expr)                                                     \
  inline Tensor& name##_out(Tensor& out, const Tensor& self) {                        \
    return detail::unary_out(out, self, #name, [](double x) { return (expr); });      \
  }                                                                                   \
  inline Tensor name(const Tensor& self) {                                            \
    Tensor out = detail::like(self);                                                  \
    return name##_out(out, self);                                                     \
  }

NCC_UNARY_OP(abs, std::fabs(x))
NCC_UNARY_OP(ceil, std::ceil(x))
NCC_UNARY_OP(floor, std::floor(x))
NCC_UNARY_OP(sin, std::sin(x))
NCC_UNARY_OP(cos, std::cos(x))
NCC_UNARY_OP(tan, std::tan(x))
NCC_UNARY_OP(log, std::log(x))
NCC_UNARY_OP(log2, std::log2(x))
NCC_UNARY_OP(log10, std::log10(x))
NCC_UNARY_OP(exp, std::exp(x))
#undef NCC_UNARY_OP

inline Tensor& clamp_out(Tensor& out, const Tensor& self, const Scalar& min, const Scalar& max) {
  double lo = min.toDouble(), hi = max.toDouble();
  return detail::unary_out(out, self, "clamp", [lo, hi](double x) { return x < lo ? lo : (x > hi ? hi : x); });
}
inline Tensor clamp(const Tensor& self, const Scalar& min, const Scalar& max) {
  Tensor out = detail::like(self);
  return clamp_out(out, self, min, max);
}

// The allocating forms op(self, other) of an op defined by its op_out forms.
#define NCC_ALLOCATING_FORMS(name)                                     \
  inline Tensor name(const Tensor& self, const Tensor& other) {        \
    Tensor out = detail::like(self);                                   \
    return name##_out(out, self, other);                               \
  }                                                                    \
  inline Tensor name(const Tensor& self, const Scalar& other) {        \
    Tensor out = detail::like(self);                                   \
    return name##_out(out, self, other);                               \
  }

#define NCC_BINARY_OP(name, expr)                                                                     \
  inline Tensor& name##_out(Tensor& out, const Tensor& self, const Tensor& other) {                   \
    detail::same_shape(self, other, #name);                                                           \
    bool integral = !is_floating(self.scalar_type());                                                 \
    return detail::binary_out(out, self, #name,                                                       \
                              [integral](double x, double y) { (void)integral; return (expr); },     \
                              detail::tensor_elem(other, #name));                                     \
  }                                                                                                   \
  inline Tensor& name##_out(Tensor& out, const Tensor& self, const Scalar& other) {                   \
    bool integral = !is_floating(self.scalar_type());                                                 \
    return detail::binary_out(out, self, #name,                                                       \
                              [integral](double x, double y) { (void)integral; return (expr); },     \
                              detail::scalar_elem(other));                                            \
  }                                                                                                   \
  NCC_ALLOCATING_FORMS(name)

NCC_BINARY_OP(mul, x * y)
NCC_BINARY_OP(div, detail::trunc_if_int(integral, x / y))
NCC_BINARY_OP(pow, std::pow(x, y))
#undef NCC_BINARY_OP

// pow with a Scalar base: out[i] = self ** exponent[i], in the exponent's dtype.
inline Tensor& pow_out(Tensor& out, const Scalar& self, const Tensor& exponent) {
  double base = self.toDouble();
  return detail::unary_out(out, exponent, "pow", [base](double y) { return std::pow(base, y); });
}
inline Tensor pow(const Scalar& self, const Tensor& exponent) {
  Tensor out = detail::like(exponent);
  return pow_out(out, self, exponent);
}

#define NCC_ALPHA_OP(name, sign)                                                                      \
  inline Tensor& name##_out(Tensor& out, const Tensor& self, const Tensor& other,                     \
                            const Scalar& alpha = 1) {                                                \
    detail::same_shape(self, other, #name);                                                           \
    double a = alpha.toDouble();                                                                      \
    return detail::binary_out(out, self, #name, [a](double x, double y) { return x sign a * y; },     \
                              detail::tensor_elem(other, #name));                                     \
  }                                                                                                   \
  inline Tensor& name##_out(Tensor& out, const Tensor& self, const Scalar& other,                     \
                            const Scalar& alpha = 1) {                                                \
    double a = alpha.toDouble();                                                                      \
    return detail::binary_out(out, self, #name, [a](double x, double y) { return x sign a * y; },     \
                              detail::scalar_elem(other));                                            \
  }                                                                                                   \
  inline Tensor name(const Tensor& self, const Tensor& other, const Scalar& alpha = 1) {              \
    Tensor out = detail::like(self);                                                                  \
    return name##_out(out, self, other, alpha);                                                       \
  }                                                                                                   \
  inline Tensor name(const Tensor& self, const Scalar& other, const Scalar& alpha = 1) {              \
    Tensor out = detail::like(self);                                                                  \
    return name##_out(out, self, other, alpha);                                                       \
  }

NCC_ALPHA_OP(add, +)
NCC_ALPHA_OP(sub, -)
#undef NCC_ALPHA_OP

#define NCC_BITWISE_OP(name, op)                                                                      \
  inline Tensor& name##_out(Tensor& out, const Tensor& self, const Tensor& other) {                   \
    detail::same_shape(self, other, #name);                                                           \
    const void* p = other.device_data(#name);                                                         \
    ScalarType t = other.scalar_type();                                                               \
    return detail::integer_out(out, self, #name, [p, t](int64_t x, int64_t k) {                       \
      int64_t y = 0;                                                                                  \
      dispatch(t, [&](auto tag) {                                                                     \
        using T = typename decltype(tag)::type;                                                       \
        y = static_cast<int64_t>(static_cast<const T*>(p)[k]);                                        \
      });                                                                                             \
      return x op y;                                                                                  \
    });                                                                                               \
  }                                                                                                   \
  inline Tensor& name##_out(Tensor& out, const Tensor& self, const Scalar& other) {                   \
    int64_t y = other.toLong();                                                                       \
    return detail::integer_out(out, self, #name, [y](int64_t x, int64_t) { return x op y; });         \
  }                                                                                                   \
  /* Scalar first: the scalar is cast to the tensor's dtype (the result's low bits, the same). */     \
  inline Tensor& name##_out(Tensor& out, const Scalar& self, const Tensor& other) {                   \
    return name##_out(out, other, self);                                                              \
  }                                                                                                   \
  inline Tensor name(const Scalar& self, const Tensor& other) {                                       \
    Tensor out = detail::like(other);                                                                 \
    return name##_out(out, other, self);                                                              \
  }                                                                                                   \
  NCC_ALLOCATING_FORMS(name)

NCC_BITWISE_OP(bitwise_and, &)
NCC_BITWISE_OP(bitwise_or, |)
#undef NCC_BITWISE_OP
#undef NCC_ALLOCATING_FORMS

inline Tensor& bitwise_not_out(Tensor& out, const Tensor& self) {
  return detail::integer_out(out, self, "bitwise_not", [](int64_t x, int64_t) { return ~x; });
}
inline Tensor bitwise_not(const Tensor& self) {
  Tensor out = detail::like(self);
  return bitwise_not_out(out, self);
}

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }

}  // namespace torch

namespace at = torch;
namespace c10 = torch;

// The operator's output tensor (written in disjoint slices by the cores in multicore mode).
// Every call on a core returns the same tensor. In single-core mode a factory tensor of the
// output's dtype and shape made earlier may already live in the output buffer (see
// torch::allocate); the destination then gets memory of its own, so that the two never alias,
// and whichever the kernel returns is copied to the output.
inline torch::Tensor get_dst_tensor() {
  ncc_gpsimd::CoreState& c = ncc_gpsimd::core();
  if (c.shape_mode || c.dst == nullptr) {
    torch::fail(torch::ErrorKind::kUsage, "get_dst_tensor() is only available in a compute function");
  }
  if (c.dst_tensor) return torch::Tensor(std::static_pointer_cast<torch::TensorImpl>(c.dst_tensor));
  const ncc_arg* d = c.dst;
  auto impl = torch::make_impl(static_cast<torch::ScalarType>(d->dtype), d->sizes, d->ndim);
  if (c.dst_taken) {
    size_t nbytes = static_cast<size_t>(impl->numel) * torch::element_size(impl->dtype);
    impl->data = std::calloc(nbytes ? nbytes : 1, 1);
    if (impl->data == nullptr) torch::fail(torch::ErrorKind::kUsage, "out of device memory");
    impl->owns = true;
  } else {
    impl->data = d->data;
    c.dst_taken = true;
  }
  impl->has_data = true;
  c.dst_tensor = impl;
  return torch::Tensor(impl);
}

namespace ncc_gpsimd {
// Bounds of the running core's stack, set by the runner (TCM accessors accept stack buffers,
// which live in the core's local memory on the device).
inline thread_local const unsigned char* tls_stack_lo = nullptr;
inline thread_local const unsigned char* tls_stack_hi = nullptr;
}  // namespace ncc_gpsimd

template <bool read_only>
inline const unsigned char* torch::TensorTcmAccessor<read_only>::c_stack_lo() { return ncc_gpsimd::tls_stack_lo; }
template <bool read_only>
inline const unsigned char* torch::TensorTcmAccessor<read_only>::c_stack_hi() { return ncc_gpsimd::tls_stack_hi; }
