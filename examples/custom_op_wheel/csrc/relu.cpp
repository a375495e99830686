#include <stdint.h>
#include <stdlib.h>
#include <torch/torch.h>

// ReLU forward and backward for the GpSimd engine, through stream accessors: each tensor is read
// or written sequentially through a 4 KB TCM buffer, so any shape works on its flattened data.

torch::Tensor relu_forward(const torch::Tensor& t_in) {
    size_t num_elem = t_in.numel();
    torch::Tensor t_out = torch::empty(t_in.sizes(), torch::kFloat);
    auto in = t_in.read_stream_accessor<float>();
    auto out = t_out.write_stream_accessor<float>();
    for (size_t i = 0; i < num_elem; i++) {
        float v = in.read();
        out.write(v > 0.0f ? v : 0.0f);
    }
    in.close();
    out.close();
    return t_out;
}

// d relu(x) / dx is 1 where x > 0, else 0 (the subgradient torch.relu uses at 0).
torch::Tensor relu_backward(const torch::Tensor& t_grad, const torch::Tensor& t_in) {
    size_t num_elem = t_in.numel();
    torch::Tensor t_out = torch::empty(t_in.sizes(), torch::kFloat);
    auto grad = t_grad.read_stream_accessor<float>();
    auto in = t_in.read_stream_accessor<float>();
    auto out = t_out.write_stream_accessor<float>();
    for (size_t i = 0; i < num_elem; i++) {
        float g = grad.read();
        out.write(in.read() > 0.0f ? g : 0.0f);
    }
    grad.close();
    in.close();
    out.close();
    return t_out;
}
