#include <stdint.h>
#include <torch/torch.h>

// Uses about 32 KB of stack: more than the undeclared 8 KB, less than a declared 64 KB.
torch::Tensor big_stack(const torch::Tensor& t) {
    volatile float scratch[8192];
    for (int k = 0; k < 8192; k++) scratch[k] = (float)k;
    float sum = 0;
    for (int k = 0; k < 8192; k += 1024) sum += scratch[k];
    torch::Tensor out = torch::zeros({1}, torch::kFloat);
    out.accessor<float, 1>()[0] = sum;
    return out;
}
