#include <stdint.h>
#include <stdlib.h>
#include <cstdio>
#include <torch/torch.h>

// Flattens and negates a float tensor through element-wise accessors.
torch::Tensor negate_compute(const torch::Tensor& t_in) {
    size_t num_elem = t_in.numel();
    torch::Tensor t_out = torch::zeros({num_elem}, torch::kFloat);
    torch::Tensor flat = torch::empty({num_elem}, torch::kFloat);

    auto out_acc = t_out.accessor<float, 1>();
    if (t_in.dim() == 1) {
        auto in_acc = t_in.accessor<float, 1>();
        for (size_t i = 0; i < num_elem; i++) out_acc[i] = -in_acc[i];
    } else {
        auto in_acc = t_in.accessor<float, 2>();
        size_t cols = t_in.size(1);
        for (size_t i = 0; i < (size_t)t_in.size(0); i++)
            for (size_t j = 0; j < cols; j++) out_acc[i * cols + j] = -in_acc[i][j];
    }
    std::printf("negate: %zu elements\n", num_elem);
    return t_out;
}
