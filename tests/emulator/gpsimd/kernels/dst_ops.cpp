#include <stdint.h>
#include <torch/torch.h>
#include "neuron/neuron-utils.hpp"

// A scratch tensor of the output's dtype and shape made before get_dst_tensor(): the two must
// not share memory (reversing through the scratch copy used to give 15..8,8..15 for 0..15).
torch::Tensor scratch_then_dst(const torch::Tensor& t) {
    int64_t n = t.numel();
    torch::Tensor scratch = torch::empty(t.sizes(), torch::kFloat);
    auto in = t.accessor<float, 1>();
    auto s = scratch.accessor<float, 1>();
    for (int64_t i = 0; i < n; i++) s[i] = in[i];
    torch::Tensor out = get_dst_tensor();
    auto o = out.accessor<float, 1>();
    for (int64_t i = 0; i < n; i++) o[i] = s[n - 1 - i];
    return out;
}

// As above, returning the scratch tensor (written after the destination): the output is what
// the kernel returns.
torch::Tensor dst_then_return_scratch(const torch::Tensor& t) {
    int64_t n = t.numel();
    torch::Tensor scratch = torch::zeros(t.sizes(), torch::kFloat);
    torch::Tensor out = get_dst_tensor();
    auto o = out.accessor<float, 1>();
    for (int64_t i = 0; i < n; i++) o[i] = 1.0f;
    auto s = scratch.accessor<float, 1>();
    auto in = t.accessor<float, 1>();
    for (int64_t i = 0; i < n; i++) s[i] = 2.0f * in[i];
    return scratch;
}

// get_dst_tensor() called twice gives one tensor.
torch::Tensor dst_twice(const torch::Tensor& t) {
    torch::Tensor scratch = torch::zeros(t.sizes(), torch::kFloat);
    torch::Tensor a = get_dst_tensor();
    a.fill_(3);
    torch::Tensor b = get_dst_tensor();
    auto bb = b.accessor<float, 1>();
    bb[0] = 4.0f;
    (void)scratch;
    return a;
}

// Fills its const input (fill_ is const in AWS's API) and returns a copy of it: the caller's
// tensor must stay as it was.
torch::Tensor fill_input(const torch::Tensor& t) {
    t.fill_(7);
    torch::Tensor out = torch::empty(t.sizes(), torch::kFloat);
    auto in = t.accessor<float, 1>();
    auto o = out.accessor<float, 1>();
    for (int64_t i = 0; i < t.numel(); i++) o[i] = in[i];
    return out;
}

// Copies its input (to make an output that lives in shared memory).
torch::Tensor copy(const torch::Tensor& t) {
    torch::Tensor out = torch::empty(t.sizes(), torch::kFloat);
    auto in = t.accessor<float, 1>();
    auto o = out.accessor<float, 1>();
    for (int64_t i = 0; i < t.numel(); i++) o[i] = in[i];
    return out;
}

// Holds an element-wise accessor while opening a read stream on the same tensor, with the policy set on the tensor (AWS's Tensor::set_accessor_coherence_policy);
// the output is the policy the tensor had before (COHERENT, 0, by default).
torch::Tensor tensor_coherence(const torch::Tensor& t, int64_t policy) {
    torch::CoherencyEnforcer::Policy before = t.get_accessor_coherence_policy();
    t.set_accessor_coherence_policy(static_cast<torch::CoherencyEnforcer::Policy>(policy));
    if (t.get_accessor_coherence_policy() != policy) return torch::full(t.sizes(), -1, torch::kFloat);
    auto elem = t.accessor<float, 1>();
    auto stream = t.read_stream_accessor<float>();  // while `elem` is live: potentially incoherent
    return torch::full(t.sizes(), static_cast<double>(before), torch::kFloat);
}
