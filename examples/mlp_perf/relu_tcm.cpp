#include <stdint.h>
#include <stdlib.h>
#include <torch/torch.h>

// ReLU through the TCM accessor: the flattened tensor moves through a TCM buffer in blocks (bulk
// copies between HBM and the core's tightly coupled memory), rectified in TCM.

torch::Tensor relu_forward(const torch::Tensor& t_in) {
    size_t num_elem = t_in.numel();
    torch::Tensor t_out = torch::zeros(t_in.sizes(), torch::kFloat);

    static constexpr size_t block = 1024;
    float* tcm = (float*)torch::neuron::tcm_malloc(sizeof(float) * block);
    if (tcm != nullptr) {
        auto in_acc = t_in.tcm_accessor();
        auto out_acc = t_out.tcm_accessor();
        for (size_t start = 0; start < num_elem; start += block) {
            size_t n = num_elem - start < block ? num_elem - start : block;
            in_acc.tensor_to_tcm<float>(tcm, start, n);
            for (size_t k = 0; k < n; k++) {
                tcm[k] = tcm[k] > 0.0f ? tcm[k] : 0.0f;
            }
            out_acc.tcm_to_tensor<float>(tcm, start, n);
        }
    }
    torch::neuron::tcm_free(tcm);
    return t_out;
}
