#include <stdint.h>
#include <torch/torch.h>

// Kernels that work on every device dtype: each switches once on the dtype and runs a typed body.
#define FOR_EACH_DTYPE(st, BODY, ...)                                        \
    switch (st) {                                                            \
        case torch::kFloat: BODY<float>(__VA_ARGS__); break;                 \
        case torch::kHalf: BODY<torch::Half>(__VA_ARGS__); break;            \
        case torch::kBFloat16: BODY<torch::BFloat16>(__VA_ARGS__); break;    \
        case torch::kInt: BODY<int32_t>(__VA_ARGS__); break;                 \
        case torch::kShort: BODY<int16_t>(__VA_ARGS__); break;               \
        case torch::kChar: BODY<int8_t>(__VA_ARGS__); break;                 \
        case torch::kByte: BODY<uint8_t>(__VA_ARGS__); break;                \
        case torch::kLong: BODY<int64_t>(__VA_ARGS__); break;                \
    }

template <typename T>
T plus_one(T v) { return static_cast<T>(static_cast<float>(v) + 1.0f); }

template <typename T>
void add_one_elem(const torch::Tensor& in, torch::Tensor& out) {
    auto a = in.accessor<T, 1>();
    auto o = out.accessor<T, 1>();
    for (int64_t i = 0; i < in.size(0); i++) o[i] = plus_one(a[i]);
}

template <typename T>
void add_one_stream(const torch::Tensor& in, torch::Tensor& out) {
    auto r = in.read_stream_accessor<T>();
    auto w = out.write_stream_accessor<T>();
    for (int64_t i = 0; i < in.numel(); i++) w.write(plus_one(r.read()));
    r.close();
    w.close();
}

template <typename T>
void add_one_tcm(const torch::Tensor& in, torch::Tensor& out) {
    const size_t block = 1000;
    T* buf = (T*)torch::neuron::tcm_malloc(sizeof(T) * block);
    auto src = in.tcm_accessor();
    auto dst = out.tcm_accessor();
    size_t n = in.numel();
    for (size_t start = 0; start < n; start += block) {
        size_t k = n - start < block ? n - start : block;
        src.tensor_to_tcm<T>(buf, start, k);
        for (size_t j = 0; j < k; j++) buf[j] = plus_one(buf[j]);
        dst.tcm_to_tensor<T>(buf, start, k);
    }
    torch::neuron::tcm_free(buf);
}

torch::Tensor add_one(const torch::Tensor& t) {
    torch::Tensor out = torch::empty(t.sizes(), t.scalar_type());
    FOR_EACH_DTYPE(t.scalar_type(), add_one_elem, t, out);
    return out;
}

torch::Tensor stream_add_one(const torch::Tensor& t) {
    torch::Tensor out = torch::empty(t.sizes(), t.scalar_type());
    FOR_EACH_DTYPE(t.scalar_type(), add_one_stream, t, out);
    return out;
}

torch::Tensor tcm_add_one(const torch::Tensor& t) {
    torch::Tensor out = torch::empty(t.sizes(), t.scalar_type());
    FOR_EACH_DTYPE(t.scalar_type(), add_one_tcm, t, out);
    return out;
}

// which = 0..9 picks abs ceil floor sin cos tan log log2 log10 exp; +10 uses the _out form.
torch::Tensor unary(const torch::Tensor& t, int64_t which) {
    typedef torch::Tensor (*Fn)(const torch::Tensor&);
    typedef torch::Tensor& (*OutFn)(torch::Tensor&, const torch::Tensor&);
    static const Fn fns[] = {torch::abs, torch::ceil, torch::floor, torch::sin, torch::cos,
                             torch::tan, torch::log, torch::log2, torch::log10, torch::exp};
    static const OutFn outs[] = {torch::abs_out, torch::ceil_out, torch::floor_out, torch::sin_out,
                                 torch::cos_out, torch::tan_out, torch::log_out, torch::log2_out,
                                 torch::log10_out, torch::exp_out};
    if (which < 10) return fns[which](t);
    torch::Tensor out = torch::empty(t.sizes(), t.scalar_type());
    outs[which - 10](out, t);
    return out;
}

// which = 0..7 picks add sub mul div pow bitwise_and bitwise_or bitwise_not(a); +10: _out form.
torch::Tensor binary(const torch::Tensor& a, const torch::Tensor& b, int64_t which) {
    bool out_form = which >= 10;
    torch::Tensor out = torch::empty(a.sizes(), a.scalar_type());
    switch (which % 10) {
        case 0: return out_form ? torch::add_out(out, a, b) : torch::add(a, b);
        case 1: return out_form ? torch::sub_out(out, a, b) : torch::sub(a, b);
        case 2: return out_form ? torch::mul_out(out, a, b) : torch::mul(a, b);
        case 3: return out_form ? torch::div_out(out, a, b) : torch::div(a, b);
        case 4: return out_form ? torch::pow_out(out, a, b) : torch::pow(a, b);
        case 5: return out_form ? torch::bitwise_and_out(out, a, b) : torch::bitwise_and(a, b);
        case 6: return out_form ? torch::bitwise_or_out(out, a, b) : torch::bitwise_or(a, b);
        default: return out_form ? torch::bitwise_not_out(out, a) : torch::bitwise_not(a);
    }
}

// clamp to [-bound, bound], add the scalar, then multiply by 2 (scalar overloads).
torch::Tensor scalar_ops(const torch::Tensor& t, const torch::Scalar& s, double bound) {
    torch::Tensor c = torch::clamp(t, -bound, bound);
    torch::Tensor added = torch::add(c, s);
    return torch::mul(added, torch::Scalar(2));
}

// which = 0..4 picks empty(+fill_ 7), zeros, ones, full(3), eye.
torch::Tensor factory(const torch::Tensor& t, int64_t which) {
    torch::TensorOptions opts = torch::TensorOptions().dtype(t.scalar_type());
    switch (which) {
        case 0: return torch::empty({3, 4}, opts).fill_(7);
        case 1: return torch::zeros({3, 4}, opts);
        case 2: return torch::ones({3, 4}, opts);
        case 3: return torch::full({3, 4}, 3, opts);
        default: return torch::eye(3, 4, opts);
    }
}

// a * x + b * y + c, with its tensors and scalar taken by value (the shape function takes them
// by const reference): both forms must work.
torch::Tensor axpb(torch::Tensor x, torch::Tensor y, torch::Scalar a, double b, int64_t c) {
    torch::Tensor ax = torch::mul(x, a);
    torch::Tensor by = torch::mul(y, torch::Scalar(b));
    return torch::add(torch::add(ax, by), torch::Scalar(c));
}
