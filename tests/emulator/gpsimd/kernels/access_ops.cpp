#include <stdint.h>
#include <torch/torch.h>

// Copies of a 1-D float tensor through each kind of accessor, to check the counters exactly.

torch::Tensor copy_elem(const torch::Tensor& t) {
    torch::Tensor out = torch::empty(t.sizes(), torch::kFloat);
    auto a = t.accessor<float, 1>();
    auto o = out.accessor<float, 1>();
    for (int64_t i = 0; i < t.size(0); i++) o[i] = a[i];
    return out;
}

torch::Tensor copy_stream(const torch::Tensor& t) {
    torch::Tensor out = torch::empty(t.sizes(), torch::kFloat);
    auto r = t.read_stream_accessor<float>();
    auto w = out.write_stream_accessor<float>();
    for (int64_t i = 0; i < t.numel(); i++) w.write(r.read());
    return out;  // both streams close (and the writer flushes) on destruction
}

torch::Tensor copy_tcm(const torch::Tensor& t) {
    torch::Tensor out = torch::empty(t.sizes(), torch::kFloat);
    float* buf = (float*)torch::neuron::tcm_malloc(4096);
    size_t n = t.numel();
    for (size_t s = 0; s < n; s += 1024) {
        size_t k = n - s < 1024 ? n - s : 1024;
        t.tcm_accessor().tensor_to_tcm<float>(buf, s, k);
        out.tcm_accessor().tcm_to_tensor<float>(buf, s, k);
    }
    torch::neuron::tcm_free(buf);
    return out;
}

torch::Tensor double_it(const torch::Tensor& t) { return torch::add(t, t); }

torch::Tensor return_input(const torch::Tensor& t) { return t; }

// Six open stream accessors: the first four get their 4 KB buffers from the 16 KB TCM pool, the
// fifth read stream and the write stream work too, at element-wise accessor speed (AWS's API
// reference: any number of stream accessors, up to four fast).
torch::Tensor five_streams(const torch::Tensor& t) {
    torch::Tensor out = torch::empty(t.sizes(), torch::kFloat);
    auto s1 = t.read_stream_accessor<float>();
    auto s2 = t.read_stream_accessor<float>();
    auto s3 = t.read_stream_accessor<float>();
    auto s4 = t.read_stream_accessor<float>();
    auto s5 = t.read_stream_accessor<float>();
    auto w = out.write_stream_accessor<float>();
    for (int64_t i = 0; i < t.numel(); i++) w.write(s1.read() + s2.read() + s3.read() + s4.read() + s5.read());
    return out;
}

// Returns a tensor whose shape differs from what the shape function declared.
torch::Tensor wrong_shape(const torch::Tensor& t) { return torch::zeros({1, 2}, torch::kFloat); }

// Writes one float past the end of a 64-float TCM buffer through a raw pointer, then frees it.
torch::Tensor tcm_overrun_freed(const torch::Tensor& t) {
    float* buf = (float*)torch::neuron::tcm_malloc(64 * sizeof(float));
    for (int k = 0; k <= 64; k++) buf[k] = 1.0f;
    torch::neuron::tcm_free(buf);
    return t;
}

// The same overrun in a buffer the kernel never frees: found when the kernel ends.
torch::Tensor tcm_overrun_kept(const torch::Tensor& t) {
    float* buf = (float*)torch::neuron::tcm_malloc(64 * sizeof(float));
    for (int k = 0; k <= 64; k++) buf[k] = 1.0f;
    return t;
}
