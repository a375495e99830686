#include <stdint.h>
#include <torch/torch.h>

// AWS's Scalar-first forms: which = 0 pow(Scalar, Tensor), 1 pow_out, 2 bitwise_and(Scalar,
// Tensor), 3 bitwise_and_out, 4 bitwise_or(Scalar, Tensor), 5 bitwise_or_out.
torch::Tensor scalar_first(const torch::Tensor& t, const torch::Scalar& s, int64_t which) {
    torch::Tensor out = torch::empty(t.sizes(), t.scalar_type());
    switch (which) {
        case 0: return torch::pow(s, t);
        case 1: torch::pow_out(out, s, t); return out;
        case 2: return torch::bitwise_and(s, t);
        case 3: torch::bitwise_and_out(out, s, t); return out;
        case 4: return torch::bitwise_or(s, t);
        default: torch::bitwise_or_out(out, s, t); return out;
    }
}
