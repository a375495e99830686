#include <stdint.h>
#include <torch/torch.h>
#include "torchneuron/register.h"

torch::Tensor like_shape(torch::Tensor t) { return torch::zeros(t.sizes(), torch::kFloat); }
torch::Tensor policy_shape(torch::Tensor t, int64_t policy) { return torch::zeros(t.sizes(), torch::kFloat); }

NEURON_LIBRARY(dst_ops, m) {
    m.def("scratch_then_dst", &like_shape, "scratch_then_dst");
    m.def("dst_then_return_scratch", &like_shape, "dst_then_return_scratch");
    m.def("dst_twice", &like_shape, "dst_twice");
    m.def("fill_input", &like_shape, "fill_input");
    m.def("copy", &like_shape, "copy");
    m.def("tensor_coherence", &policy_shape, "tensor_coherence");
}
