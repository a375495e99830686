#include <stdint.h>
#include <torch/torch.h>
#include "torchneuron/register.h"

torch::Tensor like_shape(torch::Tensor t) { return torch::zeros(t.sizes(), torch::kFloat); }
torch::Tensor coherence_shape(torch::Tensor t, int64_t policy) {
    return torch::zeros(t.sizes(), torch::kFloat);
}
torch::Tensor tcm_count_shape(torch::Tensor t) { return torch::zeros({2}, torch::kInt); }

// A shape function must not read its inputs' data: they have none on the host.
torch::Tensor reads_data_shape(torch::Tensor t) {
    auto acc = t.accessor<float, 1>();
    float first = acc[0];
    return torch::zeros({(int64_t)first}, torch::kFloat);
}

NEURON_LIBRARY(error_ops, m) {
    m.def("oob_element", &like_shape, "oob_element");
    m.def("oob_tcm", &like_shape, "oob_tcm");
    m.def("tcm_not_pool", &like_shape, "tcm_not_pool");
    m.def("tcm_exhaust", &tcm_count_shape, "tcm_exhaust");
    m.def("segfault", &like_shape, "segfault");
    m.def("abort_op", &like_shape, "abort_op");
    m.def("hang", &like_shape, "hang");
    m.def("reads_data", &reads_data_shape, "reads_data");
    m.def("coherence", &coherence_shape, "coherence");
    m.def("oob_stream", &like_shape, "oob_stream");
}
