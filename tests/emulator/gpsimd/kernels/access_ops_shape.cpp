#include <stdint.h>
#include <torch/torch.h>
#include "torchneuron/register.h"

torch::Tensor like_shape(torch::Tensor t) { return torch::zeros(t.sizes(), torch::kFloat); }

// Shape functions run on the host: their printf is the host's.
torch::Tensor noisy_shape(torch::Tensor t) {
    printf("shape function sees %ld elements\n", (long)t.numel());
    return torch::zeros(t.sizes(), torch::kFloat);
}

NEURON_LIBRARY(access_ops, m) {
    m.def("copy_elem", &like_shape, "copy_elem");
    m.def("copy_stream", &like_shape, "copy_stream");
    m.def("copy_tcm", &like_shape, "copy_tcm");
    m.def("double_it", &like_shape, "double_it");
    m.def("return_input", &like_shape, "return_input");
    m.def("five_streams", &like_shape, "five_streams");
    m.def("wrong_shape", &like_shape, "wrong_shape");
    m.def("noisy", &noisy_shape, "copy_tcm");
    m.def("tcm_overrun_freed", &like_shape, "tcm_overrun_freed");
    m.def("tcm_overrun_kept", &like_shape, "tcm_overrun_kept");
}
