#include <stdint.h>
#include <utility>
#include <torch/torch.h>

// Element-wise and stream accessors in the shapes kernels use them, each with a known number of
// element references, so that the counters can be checked exactly.

torch::Tensor copy_rows_elsewhere(const torch::Tensor& t);  // accessor_ops_rows.cpp

// ReLU of a 3-D tensor: one read and one write per element.
torch::Tensor relu3d(const torch::Tensor& t) {
    torch::Tensor out = torch::empty(t.sizes(), torch::kFloat);
    auto a = t.accessor<float, 3>();
    auto o = out.accessor<float, 3>();
    for (int64_t i = 0; i < a.size(0); i++) {
        for (int64_t j = 0; j < a.size(1); j++) {
            for (int64_t k = 0; k < a.size(2); k++) {
                float v = a[i][j][k];
                o[i][j][k] = v > 0.0f ? v : 0.0f;
            }
        }
    }
    return out;
}

// Every row of the output is row 1 of the input, read through a row whose accessor was a
// temporary: a row stays valid while its tensor lives.
torch::Tensor row_outlives(const torch::Tensor& t) {
    torch::Tensor out = torch::empty(t.sizes(), torch::kFloat);
    torch::TensorAccessor<float, 1, true> row = t.accessor<float, 2>()[1];
    auto o = out.accessor<float, 2>();
    for (int64_t i = 0; i < t.size(0); i++) {
        auto orow = o[i];
        for (int64_t j = 0; j < row.size(0); j++) orow[j] = row[j];
    }
    return out;
}

// Element references made in a function the kernel's loop calls (the accessor passed by reference).
__attribute__((noinline)) static float element(const torch::TensorAccessor<float, 1, true>& a, int64_t i) { return a[i]; }

torch::Tensor through_helper(const torch::Tensor& t) {
    torch::Tensor out = torch::empty(t.sizes(), torch::kFloat);
    auto a = t.accessor<float, 1>();
    auto o = out.accessor<float, 1>();
    for (int64_t i = 0; i < t.size(0); i++) o[i] = element(a, i) + element(a, t.size(0) - 1 - i);
    return out;
}

// Counted in two translation units: this one writes each element once more after the other one's copy.
torch::Tensor two_units(const torch::Tensor& t) {
    torch::Tensor out = copy_rows_elsewhere(t);
    auto o = out.accessor<float, 2>();
    for (int64_t i = 0; i < t.size(0); i++) {
        for (int64_t j = 0; j < t.size(1); j++) o[i][j] = 2.0f * o[i][j];
    }
    return out;
}

// Out of range in the innermost dimension (where 0), the outer one (1), or negative (2) of a 2-D accessor.
torch::Tensor oob(const torch::Tensor& t, int64_t where) {
    auto a = t.accessor<float, 2>();
    float sum = 0.0f;
    if (where == 0) {
        for (int64_t j = 0; j <= t.size(1); j++) sum += a[0][j];
    } else if (where == 1) {
        for (int64_t i = 0; i <= t.size(0); i++) sum += a[i][0];
    } else {
        for (int64_t j = 2; j >= -1; j--) sum += a[0][j];
    }
    return torch::full(t.sizes(), sum, torch::kFloat);
}

// Copies the tensor through streams and writes one element more than it has.
torch::Tensor write_past_end(const torch::Tensor& t) {
    torch::Tensor out = torch::empty(t.sizes(), torch::kFloat);
    auto r = t.read_stream_accessor<float>();
    auto w = out.write_stream_accessor<float>();
    for (int64_t i = 0; i < t.numel(); i++) w.write(r.read());
    w.write(0.0f);
    return out;
}

torch::Tensor write_after_close(const torch::Tensor& t) {
    torch::Tensor out = torch::zeros(t.sizes(), torch::kFloat);
    auto w = out.write_stream_accessor<float>();
    w.write(1.0f);
    w.close();
    w.write(2.0f);
    return out;
}

torch::Tensor read_after_close(const torch::Tensor& t) {
    auto r = t.read_stream_accessor<float>();
    r.close();
    float v = r.read();
    return torch::full(t.sizes(), v, torch::kFloat);
}

// A stream moved into another object: the new one reads on, the old one is closed.
torch::Tensor moved_stream(const torch::Tensor& t) {
    torch::Tensor out = torch::empty(t.sizes(), torch::kFloat);
    auto first = t.read_stream_accessor<float>();
    auto w = out.write_stream_accessor<float>();
    w.write(first.read());
    torch::TensorReadStreamAccessor<float> second = std::move(first);
    for (int64_t i = 1; i < t.numel(); i++) w.write(second.read());
    w.close();
    first.read();
    return out;
}
