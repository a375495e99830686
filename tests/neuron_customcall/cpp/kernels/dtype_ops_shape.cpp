#include <stdint.h>
#include <torch/torch.h>
#include "torchneuron/register.h"

torch::Tensor like_shape(torch::Tensor t) { return torch::zeros(t.sizes(), t.scalar_type()); }
torch::Tensor like_which_shape(torch::Tensor t, int64_t which) {
    return torch::zeros(t.sizes(), t.scalar_type());
}
torch::Tensor binary_shape(torch::Tensor a, torch::Tensor b, int64_t which) {
    return torch::zeros(a.sizes(), a.scalar_type());
}
torch::Tensor scalar_shape(torch::Tensor t, torch::Scalar s, double bound) {
    return torch::zeros(t.sizes(), t.scalar_type());
}
torch::Tensor factory_shape(torch::Tensor t, int64_t which) {
    return torch::zeros({3, 4}, torch::TensorOptions().dtype(t.scalar_type()));
}

torch::Tensor axpb_shape(const torch::Tensor& x, const torch::Tensor& y, const torch::Scalar& a,
                         double b, int64_t c) {
    return torch::zeros(x.sizes(), x.scalar_type());
}

NEURON_LIBRARY(dtype_ops, m) {
    m.def("add_one", &like_shape, "add_one");
    m.def("stream_add_one", &like_shape, "stream_add_one");
    m.def("tcm_add_one", &like_shape, "tcm_add_one");
    m.def("unary", &like_which_shape, "unary");
    m.def("binary", &binary_shape, "binary");
    m.def("scalar_ops", &scalar_shape, "scalar_ops");
    m.def("factory", &factory_shape, "factory");
    m.def("axpb", &axpb_shape, "axpb");
}
