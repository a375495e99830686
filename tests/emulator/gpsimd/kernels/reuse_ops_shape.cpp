#include <stdint.h>
#include <torch/torch.h>
#include "torchneuron/register.h"

torch::Tensor per_core_shape(torch::Tensor t) { return torch::zeros({16}, torch::kInt); }
torch::Tensor like_shape(torch::Tensor t) { return torch::zeros(t.sizes(), torch::kFloat); }
torch::Tensor divide_shape(torch::Tensor t, int64_t upward) { return torch::zeros(t.sizes(), torch::kFloat); }
torch::Tensor stack_shape(torch::Tensor t, int64_t bytes, int64_t core) {
    return torch::zeros(t.sizes(), torch::kFloat);
}

NEURON_LIBRARY(reuse_ops, m) {
    m.def("dirty_core", &per_core_shape, "dirty_core");
    m.def("mixed_accessors", &like_shape, "mixed_accessors");
    m.def("use_stack", &stack_shape, "use_stack");
    m.def("divide_by_three", &divide_shape, "divide_by_three");
}
