"""VectorE and ScalarE: element-wise work at one element per partition lane per cycle.

Transcendental functions run on ScalarE's activation unit; everything else element-wise
(arithmetic, compare, select, convert, reductions, sorts) on VectorE.
"""
from __future__ import annotations

import math
from typing import Any

from emulator.cost import constants as C
from emulator.cost.engines import SCALAR, VECTOR, Cost
from emulator.cost.shapes import elements

def vector_cycles(n: float) -> float:
    """Cycles of one VectorE instruction over `n` elements."""
    return C.INSTRUCTION_OVERHEAD_CYCLES + math.ceil(n / C.VECTOR_ELEMENTS_PER_CYCLE)


def scalar_cycles(n: float) -> float:
    """Cycles of one ScalarE (activation) instruction over `n` elements."""
    return C.INSTRUCTION_OVERHEAD_CYCLES + math.ceil(n / C.SCALAR_ELEMENTS_PER_CYCLE)


def elementwise(ctx: Any) -> Cost:
    """One VectorE pass over the result's elements."""
    return {VECTOR: vector_cycles(elements(ctx.type))}


def activation(ctx: Any) -> Cost:
    """One ScalarE pass over the result's elements: a transcendental on the activation unit."""
    return {SCALAR: scalar_cycles(elements(ctx.type))}


def over_inputs(ctx: Any) -> Cost:
    """One VectorE pass over every operand element (reductions: each input element is read once)."""
    return {VECTOR: vector_cycles(sum(elements(t) for t in ctx.in_types))}


def windowed(ctx: Any) -> Cost:
    """reduce_window / select_and_scatter: one pass per window tap over the output."""
    taps = math.prod(ctx.attrs["size"])
    return {VECTOR: vector_cycles(elements(ctx.type) * taps)}


def sort(ctx: Any) -> Cost:
    """A sorting network: n log2(n) element steps along the sorted dimension."""
    n = sum(elements(t) for t in ctx.in_types)
    shape = ctx.in_types[0][1]
    along = shape[ctx.attrs["dim"]] if "dim" in ctx.attrs and shape else (shape[-1] if shape else 1)
    return {VECTOR: vector_cycles(n * max(1.0, math.log2(max(along, 2))))}


def fft(ctx: Any) -> Cost:
    """About 5 n log2(n) flops per transform, on VectorE."""
    n = max(elements(ctx.in_types[0]), 1)
    length = max(math.prod(ctx.attrs["length"]), 2)
    return {VECTOR: vector_cycles(5 * n * math.log2(length))}


def passes(k: int):
    """k VectorE passes over the operands (batch-norm: statistics, then normalisation)."""
    def cost(ctx: Any) -> Cost:
        return {VECTOR: vector_cycles(k * elements(ctx.in_types[0]))}
    return cost
