#include <stdint.h>
#include <stdexcept>
#include <stdlib.h>
#include <torch/torch.h>

// A global constructor that breaks the process loading the library, chosen by a -D flag.
namespace {
struct AtLoad {
    AtLoad() {
#if defined(INIT_SEGV)
        volatile int* p = (volatile int*)(uintptr_t)16;
        *p = 1;
#elif defined(INIT_THROW)
        throw std::runtime_error("a global constructor threw");
#elif defined(INIT_HANG)
        volatile int64_t spin = 0;
        while (true) spin = spin + 1;
#endif
    }
};
AtLoad at_load;
}  // namespace

torch::Tensor twice(const torch::Tensor& t) { return torch::add(t, t); }
