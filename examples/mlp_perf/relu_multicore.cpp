#include <stdint.h>
#include <stdlib.h>
#include <torch/torch.h>
#include "neuron/neuron-utils.hpp"

// The TCM ReLU on all GpSimd cores (built with multicore=True): every core runs this function on
// its own contiguous slice of the flattened tensor (the last core takes the remainder) and writes
// straight into get_dst_tensor(); the returned tensor is ignored.

torch::Tensor relu_forward(const torch::Tensor& t_in) {
    size_t num_elem = t_in.numel();
    torch::Tensor t_out = get_dst_tensor();

    uint32_t cpu_id = get_cpu_id();
    uint32_t cpu_count = get_cpu_count();
    size_t share = num_elem / cpu_count;
    size_t begin = share * cpu_id;
    size_t part = cpu_id == cpu_count - 1 ? num_elem - begin : share;

    static constexpr size_t block = 1024;
    float* tcm = (float*)torch::neuron::tcm_malloc(sizeof(float) * block);
    if (tcm != nullptr) {
        auto in_acc = t_in.tcm_accessor();
        auto out_acc = t_out.tcm_accessor();
        for (size_t i = 0; i < part; i += block) {
            size_t n = part - i < block ? part - i : block;
            in_acc.tensor_to_tcm<float>(tcm, begin + i, n);
            for (size_t k = 0; k < n; k++) {
                tcm[k] = tcm[k] > 0.0f ? tcm[k] : 0.0f;
            }
            out_acc.tcm_to_tensor<float>(tcm, begin + i, n);
        }
    }
    torch::neuron::tcm_free(tcm);
    return t_out;
}
