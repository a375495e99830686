#include <stdint.h>
#include <torch/torch.h>
#include "torchneuron/register.h"

torch::Tensor like_shape(torch::Tensor t) { return torch::zeros(t.sizes(), torch::kFloat); }
torch::Tensor fork_shape(torch::Tensor t, int64_t seconds) { return torch::zeros(t.sizes(), torch::kFloat); }

NEURON_LIBRARY(hostile_ops, m) {
    m.def("fork_then_crash", &fork_shape, "fork_then_crash");
    m.def("probe", &like_shape, "probe");
    m.def("spin", &like_shape, "spin");
    m.def("reach_out", &like_shape, "reach_out");
}
