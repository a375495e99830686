"""The GpSimd cost model: estimated device cycles of one execution from its counters.

Each counter has a cost per unit; the constants and where they come from are in docs/gpsimd.md.
Multicore counters are summed over cores, and the cores work in parallel, so the total is divided
by the core count (the model assumes the kernel balances its slices, as the tutorial's does).
"""

from __future__ import annotations

from dataclasses import dataclass

CLOCK_HZ = 1.4e9              # assumed GpSimd clock (NeuronCore-v2 engine clock)
VECTOR_BYTES = 64             # 512-bit vector unit per core: 16 fp32 lanes
CORES = 8                     # GpSimd cores per NeuronCore
ELEMENT_ACCESS_CYCLES = 64.0  # one uncached HBM element reference through an element accessor
STREAM_BYTES_PER_CYCLE = 4.0  # scalar stream accessors: one 32-bit element per cycle from TCM
TCM_DMA_BYTES_PER_CYCLE = 32.0  # block copies between HBM and TCM (tensor_to_tcm/tcm_to_tensor)
FACTORY_BYTES_PER_CYCLE = 32.0  # factories fill HBM with the same block engine
ARITH_ELEMENTS_PER_CYCLE = 16.0  # tensor-library arithmetic runs on the 16 fp32 lanes


# counter -> cycles per unit
COST_TABLE: dict[str, float] = {
    "element_accesses": ELEMENT_ACCESS_CYCLES,
    "stream_bytes": 1.0 / STREAM_BYTES_PER_CYCLE,
    "tcm_bytes": 1.0 / TCM_DMA_BYTES_PER_CYCLE,
    "factory_bytes": 1.0 / FACTORY_BYTES_PER_CYCLE,
    "arith_elements": 1.0 / ARITH_ELEMENTS_PER_CYCLE,
}


@dataclass(frozen=True)
class CostEstimate:
    """Estimated cycles (total and per counter) and the corresponding device time."""

    cycles: float
    breakdown: dict[str, float]
    ncores: int

    @property
    def seconds(self) -> float:
        return self.cycles / CLOCK_HZ


def estimate(counters: dict[str, int], ncores: int = 1) -> CostEstimate:
    """Cycles of one execution on `ncores` cores (1, or 8 in multicore mode)."""
    breakdown = {name: counters.get(name, 0) * per_unit / ncores for name, per_unit in COST_TABLE.items()}
    return CostEstimate(sum(breakdown.values()), breakdown, ncores)
