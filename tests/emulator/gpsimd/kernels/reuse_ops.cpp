#include <alloca.h>
#include <fenv.h>
#include <stdint.h>
#include <string.h>
#include <torch/torch.h>
#include "neuron/neuron-utils.hpp"

// Kernels that leave state behind on their core (TCM contents and blocks, the coherence policy,
// printf output, stack) so that tests can check that the next run on the same core starts fresh.

// Slot 2 * core: how many bytes of a new 4 KB TCM block are not zero; slot 2 * core + 1: the
// core's id. Then scribbles over the block, takes a second one and frees neither, prints a line
// and relaxes the coherence policy, none of which the next run may see.
torch::Tensor dirty_core(const torch::Tensor& t) {
    torch::Tensor out = get_dst_tensor();
    unsigned char* block = (unsigned char*)torch::neuron::tcm_malloc(4096);
    int32_t* result = (int32_t*)torch::neuron::tcm_malloc(2 * sizeof(int32_t));
    int32_t nonzero = 0;
    for (int k = 0; k < 4096; k++) nonzero += block[k] != 0;
    memset(block, 0x5A, 4096);
    result[0] = nonzero;
    result[1] = (int32_t)get_cpu_id();
    out.tcm_accessor().tcm_to_tensor<int32_t>(result, 2 * get_cpu_id(), 2);
    printf("core %u ran\n", get_cpu_id());
    torch::neuron::set_coherence_policy(torch::neuron::INCOHERENT_QUIET);
    return out;
}

// Takes an element-wise accessor to a tensor while a write stream to it is open: an error
// under the default (COHERENT) policy.
torch::Tensor mixed_accessors(const torch::Tensor& t) {
    torch::Tensor out = torch::zeros(t.sizes(), torch::kFloat);
    auto stream = out.write_stream_accessor<float>();
    out.accessor<float, 1>()[0] = 1.0f;
    stream.close();
    return out;
}

// Writes `bytes` bytes of stack, from the top down as a growing stack would, on core `core`
// (every core when it is -1), and returns the output tensor untouched.
torch::Tensor use_stack(const torch::Tensor& t, int64_t bytes, int64_t core) {
    torch::Tensor out = get_dst_tensor();
    if (core < 0 || (uint32_t)core == get_cpu_id()) {
        volatile unsigned char* scratch = (volatile unsigned char*)alloca((size_t)bytes);
        for (int64_t k = bytes - 1; k >= 0; k--) scratch[k] = (unsigned char)(k + 1);
    }
    return out;
}

// Each element divided by 3; with `upward`, after switching this core's rounding mode to upward
// (and leaving it so): the next run must round to nearest again.
torch::Tensor divide_by_three(const torch::Tensor& t, int64_t upward) {
    if (upward) fesetround(FE_UPWARD);
    torch::Tensor out = torch::zeros(t.sizes(), torch::kFloat);
    auto in = t.accessor<float, 1>();
    auto res = out.accessor<float, 1>();
    volatile float three = 3.0f;
    for (int64_t k = 0; k < t.size(0); k++) res[k] = in[k] / three;
    return out;
}
