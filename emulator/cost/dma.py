"""DMA: data movement at the core's share of HBM bandwidth plus a fixed latency per transfer.

Graph-level movement (gather, scatter, dynamic slices, copies, transposes, concatenations,
broadcasts, pads) and NKI load/store are DMA transfers of the bytes they write.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from emulator.cost import constants as C
from emulator.cost.engines import DMA, Cost
from emulator.cost.shapes import nbytes


def dma_cycles(n_bytes: float) -> float:
    """Cycles of one DMA transfer of `n_bytes`."""
    return C.DMA_FIXED_CYCLES + math.ceil(n_bytes / C.DMA_BYTES_PER_CYCLE)


def result_bytes(ctx: Any) -> Cost:
    """A transfer writing the instruction's result."""
    return {DMA: dma_cycles(nbytes(ctx.type))}


def operand_bytes(k: int) -> Callable[[Any], Cost]:
    """A transfer writing operand k's bytes: the update of a dynamic-update-slice (1) or a
    scatter (-1), which is all they write (in place)."""
    def cost(ctx: Any) -> Cost:
        return {DMA: dma_cycles(nbytes(ctx.in_types[k]))}
    return cost


def broadcast(ctx: Any) -> Cost:
    """A broadcast of one element is free: engines take scalar operands directly (tensor_scalar,
    activation bias). Others materialise the result by DMA."""
    if math.prod(ctx.in_types[0][1]) <= 1:
        return {}
    return result_bytes(ctx)
