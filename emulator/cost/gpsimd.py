"""GpSimd payloads: cycles from the runtime's counters of the execution, through the one GpSimd
cost model (emulator/gpsimd/cost.py; its constants are documented in docs/gpsimd.md)."""
from __future__ import annotations

from collections.abc import Mapping

from emulator.cost.engines import GPSIMD, Cost
from emulator.gpsimd.cost import estimate


def gpsimd_cost(counters: Mapping[str, int], ncores: int) -> Cost:
    """Cycles of one GpSimd op execution on `ncores` cores (1, or 8 in multicore mode)."""
    return {GPSIMD: estimate(dict(counters), ncores).cycles}
