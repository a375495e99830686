#include <stdint.h>
#include <torch/torch.h>
#include "torchneuron/register.h"

torch::Tensor scalar_first_shape(torch::Tensor t, torch::Scalar s, int64_t which) {
    return torch::zeros(t.sizes(), t.scalar_type());
}

NEURON_LIBRARY(scalar_first_ops, m) { m.def("scalar_first", &scalar_first_shape, "scalar_first"); }
