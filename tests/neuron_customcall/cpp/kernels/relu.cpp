#include <stdint.h>
#include <stdlib.h>
#include <torch/torch.h>

// ReLU forward and backward on 2-D float tensors with element-wise accessors.
torch::Tensor relu_forward(const torch::Tensor& t_in) {
    torch::Tensor t_out = torch::zeros(t_in.sizes(), torch::kFloat);
    auto in_acc = t_in.accessor<float, 2>();
    auto out_acc = t_out.accessor<float, 2>();
    for (int64_t i = 0; i < t_in.size(0); i++) {
        for (int64_t j = 0; j < t_in.size(1); j++) {
            float v = in_acc[i][j];
            out_acc[i][j] = v > 0.0f ? v : 0.0f;
        }
    }
    return t_out;
}

torch::Tensor relu_backward(const torch::Tensor& t_grad, const torch::Tensor& t_in) {
    torch::Tensor t_out = torch::zeros(t_in.sizes(), torch::kFloat);
    auto grad_acc = t_grad.accessor<float, 2>();
    auto in_acc = t_in.accessor<float, 2>();
    auto out_acc = t_out.accessor<float, 2>();
    for (int64_t i = 0; i < t_in.size(0); i++) {
        for (int64_t j = 0; j < t_in.size(1); j++) {
            out_acc[i][j] = in_acc[i][j] > 0.0f ? grad_acc[i][j] : 0.0f;
        }
    }
    return t_out;
}
