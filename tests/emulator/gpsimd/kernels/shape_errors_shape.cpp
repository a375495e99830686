#include <stdint.h>
#include <stdexcept>
#include <stdlib.h>
#include <torch/torch.h>
#include "torchneuron/register.h"

// Shape functions that break the host in every way user code can: each must become a Python
// exception naming the op, with the host process unharmed.

torch::Tensor good_shape(torch::Tensor t) { return torch::zeros(t.sizes(), torch::kFloat); }
torch::Tensor first_n_shape(torch::Tensor t, int64_t n) { return torch::zeros({n}, torch::kFloat); }

torch::Tensor segv_shape(torch::Tensor t) {
    volatile int64_t* p = (volatile int64_t*)(uintptr_t)16;
    p[0] = t.numel();
    return torch::zeros(t.sizes(), torch::kFloat);
}

torch::Tensor abort_shape(torch::Tensor t) {
    abort();
    return torch::zeros(t.sizes(), torch::kFloat);
}

torch::Tensor throws_shape(torch::Tensor t) {
    throw std::runtime_error("no shape for you");
    return torch::zeros(t.sizes(), torch::kFloat);
}

torch::Tensor throws_int_shape(torch::Tensor t) {
    throw 42;
    return torch::zeros(t.sizes(), torch::kFloat);
}

torch::Tensor hang_shape(torch::Tensor t) {
    volatile int64_t spin = 0;
    while (true) spin = spin + 1;
    return torch::zeros(t.sizes(), torch::kFloat);
}

NEURON_LIBRARY(shape_errors, m) {
    m.def("good", &good_shape, "copy");
    m.def("first_n", &first_n_shape, "first_n");
    m.def("segv", &segv_shape, "copy");
    m.def("abort_op", &abort_shape, "copy");
    m.def("throws", &throws_shape, "copy");
    m.def("throws_int", &throws_int_shape, "copy");
    m.def("hang", &hang_shape, "copy");
}
