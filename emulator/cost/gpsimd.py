"""GpSimd: payloads' cycles from the runtime's counters of the execution, and kernel-IR
instructions' from their tile sizes, both through the one GpSimd cost model
(emulator/gpsimd/cost.py; its constants are documented in docs/gpsimd.md)."""
from __future__ import annotations

import math
from collections.abc import Mapping

from emulator.cost import constants as C
from emulator.cost.engines import GPSIMD, Cost
from emulator.gpsimd.cost import ARITH_ELEMENTS_PER_CYCLE, CORES, estimate


def gpsimd_cost(counters: Mapping[str, int], ncores: int) -> Cost:
    """Cycles of one GpSimd op execution on `ncores` cores (1, or 8 in multicore mode)."""
    return {GPSIMD: estimate(dict(counters), ncores).cycles}


def gpsimd_cycles(n: float) -> float:
    """Cycles of one GpSimd kernel instruction over `n` elements: the 8 cores' 16 fp32 lanes
    each (the GpSimd model's constants), after the instruction overhead every engine pays."""
    return C.INSTRUCTION_OVERHEAD_CYCLES + math.ceil(n / (CORES * ARITH_ELEMENTS_PER_CYCLE))
