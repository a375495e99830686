#include <stdint.h>
#include <stdlib.h>
#include <torch/torch.h>
#include "neuron/neuron-utils.hpp"

// Multicore ReLU: core k rectifies the k-th contiguous slice of the flattened tensor, writing
// straight into the output tensor; the last core also takes the remainder.
torch::Tensor relu_forward_mc(const torch::Tensor& t_in) {
    size_t num_elem = t_in.numel();
    torch::Tensor t_out = get_dst_tensor();

    uint32_t cpu_id = get_cpu_id();
    uint32_t cpu_count = get_cpu_count();
    size_t share = num_elem / cpu_count;
    size_t begin = share * cpu_id;
    size_t end = cpu_id == cpu_count - 1 ? num_elem : begin + share;

    const size_t block = 2048;
    float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * block);
    if (buf == nullptr) return t_out;
    auto in_tcm = t_in.tcm_accessor();
    auto out_tcm = t_out.tcm_accessor();
    for (size_t start = begin; start < end; start += block) {
        size_t n = end - start < block ? end - start : block;
        in_tcm.tensor_to_tcm<float>(buf, start, n);
        for (size_t k = 0; k < n; k++) buf[k] = buf[k] > 0.0f ? buf[k] : 0.0f;
        out_tcm.tcm_to_tensor<float>(buf, start, n);
    }
    torch::neuron::tcm_free(buf);
    return t_out;
}

// Each core writes its id (times ten, plus the core count) into slot get_cpu_id() of the output.
torch::Tensor core_ids(const torch::Tensor& t_in) {
    torch::Tensor t_out = get_dst_tensor();
    int32_t* slot = (int32_t*)torch::neuron::tcm_malloc(sizeof(int32_t));
    slot[0] = (int32_t)(get_cpu_id() * 10 + get_cpu_count());
    t_out.tcm_accessor().tcm_to_tensor<int32_t>(slot, get_cpu_id(), 1);
    torch::neuron::tcm_free(slot);
    return t_out;
}
