"""NKI kernel IR: cycles per engine of one kernel launch, from the IR alone.

Each instruction is costed by a TABLE entry (op -> function of the instruction and the kernel's
tensor declarations), times the trip counts of its enclosing loops and the grid size. The
engines of a kernel work in parallel; its profile shows one event per engine it uses.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from emulator.cost.dma import dma_cycles
from emulator.cost.engines import DMA, NONE, SCALAR, TENSOR, VECTOR, Cost
from emulator.cost.tensor import FAST_DTYPES, nc_matmul_cycles
from emulator.cost.vector import scalar_cycles, vector_cycles
from emulator.kernel_ir import ir
from emulator.kernel_ir.dtypes import DTYPES


def _free(shape: tuple[int, ...]) -> int:
    """Free size of a tile: elements per partition (all axes but the first)."""
    return math.prod(shape[1:]) if len(shape) > 1 else 1


def _accesses(ins: ir.Instruction) -> list[ir.Access]:
    return [a for a in (ins.dst, *ins.srcs) if isinstance(a, ir.Access)]


def _matmul(ins: ir.Instruction, tensors: dict[str, ir.TensorDecl]) -> Cost:
    """nc_matmul: stationary srcs[0], moving srcs[1] (nki-api.md formula)."""
    st, mv = ins.srcs[0], ins.srcs[1]
    fp32 = tensors[st.tensor].dtype not in FAST_DTYPES or tensors[mv.tensor].dtype not in FAST_DTYPES
    return {TENSOR: nc_matmul_cycles(_free(st.shape), _free(mv.shape), fp32)}


def _transpose(ins: ir.Instruction, tensors: dict[str, ir.TensorDecl]) -> Cost:
    """nc_transpose on TensorE: a matmul against the identity (moving free = partitions)."""
    src = ins.srcs[0]
    fp32 = tensors[src.tensor].dtype not in FAST_DTYPES
    return {TENSOR: nc_matmul_cycles(_free(src.shape), src.shape[0] if src.shape else 1, fp32)}


def _activation(ins: ir.Instruction, tensors: dict[str, ir.TensorDecl]) -> Cost:
    """ScalarE: one element per partition lane per cycle over the destination tile."""
    return {SCALAR: scalar_cycles(math.prod(ins.dst.shape))}


def _vector(ins: ir.Instruction, tensors: dict[str, ir.TensorDecl]) -> Cost:
    """VectorE: one pass over the largest tile the instruction touches."""
    return {VECTOR: vector_cycles(max((math.prod(a.shape) for a in _accesses(ins)), default=1))}


def _dma(ins: ir.Instruction, tensors: dict[str, ir.TensorDecl]) -> Cost:
    """load/store: the destination tile's bytes over DMA."""
    dst = ins.dst
    return {DMA: dma_cycles(math.prod(dst.shape) * DTYPES[tensors[dst.tensor].dtype].itemsize)}


def _free_op(ins: ir.Instruction, tensors: dict[str, ir.TensorDecl]) -> Cost:
    return {}


InstructionCost = Callable[[ir.Instruction, dict[str, ir.TensorDecl]], Cost]

#: kernel-IR op -> cost function
TABLE: dict[str, InstructionCost] = {
    "alloc": _free_op,
    "load": _dma, "store": _dma,
    "matmul": _matmul, "transpose": _transpose,
    "activation": _activation,
    **{op: _vector for op in ("tensor_copy", "memset", "iota", "random", "tensor_tensor", "tensor_scalar",
                              "select", "affine_select", "tensor_reduce", "partition_reduce", "bn_stats",
                              "bn_aggr", "tensor_tensor_scan")},
}


def kernel_cost(kernel: ir.KernelIR) -> Cost:
    """Cycles per engine of one launch: every instruction times its loops' trip counts, times
    the grid size (grid instances run one after another on the one core)."""
    total: Cost = {}
    _add_body(kernel.body, kernel.tensors, math.prod(kernel.grid) if kernel.grid else 1, total)
    total.pop(NONE, None)
    return total


def _add_body(body: list[Any], tensors: dict[str, ir.TensorDecl], times: int, total: Cost) -> None:
    for st in body:
        if isinstance(st, ir.Loop):
            _add_body(st.body, tensors, times * st.extent, total)
            continue
        cost = TABLE.get(st.op, _vector)(st, tensors)
        for engine, cycles in cost.items():
            total[engine] = total.get(engine, 0.0) + cycles * times
