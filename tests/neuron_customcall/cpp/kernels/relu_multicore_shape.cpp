#include <stdint.h>
#include <stdlib.h>
#include <torch/torch.h>
#include "torchneuron/register.h"

torch::Tensor relu_mc_shape(torch::Tensor t_in) {
    return torch::zeros(t_in.sizes(), torch::kFloat);
}

torch::Tensor core_ids_shape(torch::Tensor t_in) {
    return torch::zeros({(int64_t)8}, torch::kInt);
}

NEURON_LIBRARY(relu_mc, m) {
    m.def("relu_forward", &relu_mc_shape, "relu_forward_mc");
    m.def("core_ids", &core_ids_shape, "core_ids");
}
