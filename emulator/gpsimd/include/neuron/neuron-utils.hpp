// neuron/neuron-utils.hpp: which emulated GpSimd core this kernel instance runs on.
#pragma once

#include <cstdint>

#include "neuron/gpsimd_runtime.hpp"

// The running core's id, in [0, get_cpu_count()); 0 in single-core mode.
inline uint32_t get_cpu_id() { return ncc_gpsimd::core().cpu_id; }

// The number of cores running this kernel: 8 in multicore mode, 1 otherwise.
inline uint32_t get_cpu_count() { return ncc_gpsimd::core().cpu_count; }
