#include <stdint.h>
#include <stdlib.h>
#include <torch/torch.h>

// ReLU through the TCM accessor: blocks of the flattened tensor are copied into a TCM buffer,
// rectified there and copied back.
torch::Tensor relu_tcm(const torch::Tensor& t_in) {
    size_t num_elem = t_in.numel();
    torch::Tensor t_out = torch::empty(t_in.sizes(), torch::kFloat);

    const size_t block = 2048;
    float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * block);
    if (buf == nullptr) return t_out;

    auto in_tcm = t_in.tcm_accessor();
    auto out_tcm = t_out.tcm_accessor();
    for (size_t start = 0; start < num_elem; start += block) {
        size_t n = num_elem - start < block ? num_elem - start : block;
        in_tcm.tensor_to_tcm<float>(buf, start, n);
        for (size_t k = 0; k < n; k++) buf[k] = buf[k] > 0.0f ? buf[k] : 0.0f;
        out_tcm.tcm_to_tensor<float>(buf, start, n);
    }
    torch::neuron::tcm_free(buf);
    return t_out;
}
