#include <stdint.h>
#include <stdlib.h>
#include <torch/torch.h>

// Kernels that break the device's rules, one rule each.

torch::Tensor oob_element(const torch::Tensor& t) {
    torch::Tensor out = torch::zeros(t.sizes(), torch::kFloat);
    auto a = t.accessor<float, 1>();
    auto o = out.accessor<float, 1>();
    for (int64_t i = 0; i <= t.size(0); i++) o[i] = a[i];  // one past the end
    return out;
}

torch::Tensor oob_tcm(const torch::Tensor& t) {
    torch::Tensor out = torch::zeros(t.sizes(), torch::kFloat);
    float* buf = (float*)torch::neuron::tcm_malloc(64 * sizeof(float));
    t.tcm_accessor().tensor_to_tcm<float>(buf, t.numel() - 2, 4);  // runs past the tensor
    torch::neuron::tcm_free(buf);
    return out;
}

torch::Tensor tcm_not_pool(const torch::Tensor& t) {
    torch::Tensor out = torch::zeros(t.sizes(), torch::kFloat);
    float* buf = (float*)torch::neuron::tcm_malloc(4 * sizeof(float));
    t.tcm_accessor().tensor_to_tcm<float>(buf, 0, 8);  // larger than the TCM block
    return out;
}

// Allocates 1 KB TCM blocks until tcm_malloc returns nullptr; reports the count and the bytes.
torch::Tensor tcm_exhaust(const torch::Tensor& t) {
    void* blocks[64];
    int32_t count = 0;
    while (count < 64) {
        void* p = torch::neuron::tcm_malloc(1024);
        if (p == nullptr) break;
        blocks[count++] = p;
    }
    for (int32_t k = 0; k < count; k++) torch::neuron::tcm_free(blocks[k]);
    torch::Tensor out = torch::zeros({2}, torch::kInt);
    auto o = out.accessor<int32_t, 1>();
    o[0] = count;
    o[1] = torch::neuron::tcm_malloc(16 * 1024 + 1) == nullptr ? 1 : 0;
    return out;
}

torch::Tensor segfault(const torch::Tensor& t) {
    volatile float* p = (volatile float*)(uintptr_t)16;
    p[0] = 1.0f;
    return t;
}

torch::Tensor abort_op(const torch::Tensor& t) {
    abort();
    return t;
}

torch::Tensor hang(const torch::Tensor& t) {
    volatile int64_t spin = 0;
    while (true) spin = spin + 1;
    return t;
}

torch::Tensor reads_data(const torch::Tensor& t) { return torch::zeros({1}, torch::kFloat); }

// Holds an element-wise accessor while opening a read stream on the same tensor.
torch::Tensor coherence(const torch::Tensor& t, int64_t policy) {
    torch::neuron::CoherencePolicy policies[] = {torch::neuron::COHERENT,
                                                 torch::neuron::INCOHERENT_VERBOSE,
                                                 torch::neuron::INCOHERENT_QUIET};
    torch::neuron::set_coherence_policy(policies[policy]);
    torch::Tensor out = torch::zeros(t.sizes(), torch::kFloat);
    auto elem = t.accessor<float, 1>();
    auto stream = t.read_stream_accessor<float>();
    auto o = out.accessor<float, 1>();
    for (int64_t i = 0; i < t.numel(); i++) o[i] = stream.read() + 0.0f * elem[i];
    stream.close();
    return out;
}

torch::Tensor oob_stream(const torch::Tensor& t) {
    torch::Tensor out = torch::zeros(t.sizes(), torch::kFloat);
    auto r = t.read_stream_accessor<float>();
    float sum = 0;
    for (int64_t i = 0; i <= t.numel(); i++) sum += r.read();  // one read too many
    return out;
}
