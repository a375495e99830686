#include <stdint.h>
#include <torch/torch.h>
#include "neuron/neuron-utils.hpp"

// Multicore kernels may only use TCM accessors; this one tries an element-wise accessor.
torch::Tensor element_in_multicore(const torch::Tensor& t) {
    torch::Tensor out = get_dst_tensor();
    auto a = t.accessor<float, 1>();
    (void)a;
    return out;
}

// Every core prints `lines` lines; only core 0's output reaches the host.
torch::Tensor chatty(const torch::Tensor& t, int64_t lines) {
    for (int64_t k = 0; k < lines; k++) {
        printf("core %u says line %06ld\n", get_cpu_id(), (long)k);
    }
    return get_dst_tensor();
}

// Writes its result somewhere other than get_dst_tensor(): in multicore mode the return value is
// ignored, so nothing reaches the output.
torch::Tensor no_dst(const torch::Tensor& t) {
    torch::Tensor out = torch::zeros(t.sizes(), torch::kFloat);
    return out;
}
