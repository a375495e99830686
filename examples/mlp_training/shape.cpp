#include <stdint.h>
#include <stdlib.h>
#include <torch/torch.h>
#include "torchneuron/register.h"

// Shape functions: run on the host while the graph is traced, they give each op's result dtype and
// sizes without touching data. NEURON_LIBRARY binds each to its compute function by name.

torch::Tensor relu_fwd_shape(torch::Tensor t_in) {
    return torch::zeros(t_in.sizes(), torch::kFloat);
}

torch::Tensor relu_bwd_shape(torch::Tensor t_grad, torch::Tensor t_in) {
    return torch::zeros(t_in.sizes(), torch::kFloat);
}

NEURON_LIBRARY(my_ops, m) {
    m.def("relu_forward", &relu_fwd_shape, "relu_forward");
    m.def("relu_backward", &relu_bwd_shape, "relu_backward");
}
