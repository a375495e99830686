#include <stdint.h>
#include <stdlib.h>
#include <torch/torch.h>

// The training tutorial's ReLU for the GpSimd engine, written with element-wise accessors: the
// simplest way in (each element is one indexed read or write), and the slowest (see
// examples/mlp_perf for the TCM and multicore versions). Inputs are the MLP's 2-D activations.

torch::Tensor relu_forward(const torch::Tensor& t_in) {
    size_t rows = t_in.size(0);
    size_t cols = t_in.size(1);
    torch::Tensor t_out = torch::zeros(t_in.sizes(), torch::kFloat);
    auto t_in_acc = t_in.accessor<float, 2>();
    auto t_out_acc = t_out.accessor<float, 2>();
    for (size_t i = 0; i < rows; i++) {
        for (size_t j = 0; j < cols; j++) {
            t_out_acc[i][j] = t_in_acc[i][j] > 0.0f ? t_in_acc[i][j] : 0.0f;
        }
    }
    return t_out;
}

// The gradient passes where the forward input was positive (torch.relu's choice at 0: none).
torch::Tensor relu_backward(const torch::Tensor& t_grad, const torch::Tensor& t_in) {
    size_t rows = t_in.size(0);
    size_t cols = t_in.size(1);
    torch::Tensor t_out = torch::zeros(t_in.sizes(), torch::kFloat);
    auto t_in_acc = t_in.accessor<float, 2>();
    auto t_grad_acc = t_grad.accessor<float, 2>();
    auto t_out_acc = t_out.accessor<float, 2>();
    for (size_t i = 0; i < rows; i++) {
        for (size_t j = 0; j < cols; j++) {
            t_out_acc[i][j] = t_in_acc[i][j] > 0.0f ? t_grad_acc[i][j] : 0.0f;
        }
    }
    return t_out;
}
