"""NKI kernel IR: cycles per engine of one kernel launch, from the IR alone.

Each instruction is costed by the rule of the engine that runs it (``ENGINE_COST``: a function of
the instruction and the kernel's tensor declarations; ``OP_COST`` for the few with a rule of
their own, the collectives on NeuronLink), times the trip counts of its enclosing
loops and the grid size. The
engines of a kernel work in parallel; its profile shows one event per engine it uses.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from emulator.cost.dma import dma_cycles
from emulator.cost.engines import DMA, GPSIMD, NONE, SCALAR, TENSOR, VECTOR, Cost
from emulator.cost.gpsimd import gpsimd_cycles
from emulator.cost.neuronlink import kernel_collective
from emulator.cost.tensor import FAST_DTYPES, nc_matmul_cycles
from emulator.cost.vector import scalar_cycles, vector_cycles
from emulator.kernel_ir import ir
from emulator.kernel_ir.dtypes import itemsize
from emulator.kernel_ir.instructions import spec


def _free(shape: tuple[int, ...]) -> int:
    """Free size of a tile: elements per partition (all axes but the first)."""
    return math.prod(shape[1:]) if len(shape) > 1 else 1


def _accesses(ins: ir.Instruction) -> list[ir.Access]:
    return [a for a in (ins.dst, *ins.srcs) if isinstance(a, ir.Access)]


def _tensor(ins: ir.Instruction, tensors: dict[str, ir.TensorDecl]) -> Cost:
    """TensorE (nki-api.md formula): stationary srcs[0], moving srcs[1]; a transpose is a matmul
    against the identity, whose free size is the source's partitions."""
    st = ins.srcs[0]
    mv_free = _free(ins.srcs[1].shape) if len(ins.srcs) > 1 else (st.shape[0] if st.shape else 1)
    fp32 = any(tensors[a.tensor].dtype not in FAST_DTYPES
               for a in ins.srcs if isinstance(a, ir.Access))
    return {TENSOR: nc_matmul_cycles(_free(st.shape), mv_free, fp32)}


def _scalar(ins: ir.Instruction, tensors: dict[str, ir.TensorDecl]) -> Cost:
    """ScalarE: one element per partition lane per cycle over the destination tile."""
    return {SCALAR: scalar_cycles(math.prod(ins.dst.shape))}


def _largest(ins: ir.Instruction) -> int:
    return max((math.prod(a.shape) for a in _accesses(ins)), default=1)


def _vector(ins: ir.Instruction, tensors: dict[str, ir.TensorDecl]) -> Cost:
    """VectorE: one pass over the largest tile the instruction touches."""
    return {VECTOR: vector_cycles(_largest(ins))}


def _gpsimd(ins: ir.Instruction, tensors: dict[str, ir.TensorDecl]) -> Cost:
    """GpSimd: one pass over the largest tile, on its 8 cores' 16 fp32 lanes each."""
    return {GPSIMD: gpsimd_cycles(_largest(ins))}


def _dma(ins: ir.Instruction, tensors: dict[str, ir.TensorDecl]) -> Cost:
    """load/store: the destination tile's bytes over DMA."""
    dst = ins.dst
    return {DMA: dma_cycles(math.prod(dst.shape) * itemsize(tensors[dst.tensor].dtype))}


def _free_op(ins: ir.Instruction, tensors: dict[str, ir.TensorDecl]) -> Cost:
    return {}


def _access_bytes(a: Any, tensors: dict[str, ir.TensorDecl]) -> int:
    return math.prod(a.shape) * itemsize(tensors[a.tensor].dtype) if isinstance(a, ir.Access) else 0


def _collective(ins: ir.Instruction, tensors: dict[str, ir.TensorDecl]) -> Cost:
    """nki.collectives: a ring over NeuronLink (emulator/cost/neuronlink.py), not a DMA of the
    destination."""
    return kernel_collective(dict(ins.attrs), _access_bytes(ins.srcs[0], tensors), _access_bytes(ins.dst, tensors))


InstructionCost = Callable[[ir.Instruction, dict[str, ir.TensorDecl]], Cost]

#: engine -> cost rule of an instruction running on it (the engine comes from the instruction's
#: spec, emulator/kernel_ir/instructions.py, or its ``engine`` attribute where NKI lets the kernel
#: choose).
ENGINE_COST: dict[str, InstructionCost] = {
    TENSOR: _tensor, VECTOR: _vector, SCALAR: _scalar, GPSIMD: _gpsimd, DMA: _dma, NONE: _free_op,
}
#: instructions whose cost is not their engine's rule
OP_COST: dict[str, InstructionCost] = {"collective": _collective}


@dataclass(frozen=True)
class InstructionCycles:
    """One instruction of a kernel on one engine: its cycles summed over every execution in a
    launch (its loops' trip counts times the grid), for the profile's per-instruction tracks."""

    op: str
    engine: str
    cycles: float
    executions: int
    bytes: int  # bytes of the tiles it touches, per execution
    line: str  # "file:line" of the kernel source, or ""


class KernelCost(dict):
    """A launch's cycles per engine (a Cost) that also carries them per instruction (`parts`:
    engine -> its instructions in program order), which sum to the same totals. Grouped once
    here: the profile lays them out at every execution of the kernel."""

    parts: dict[str, tuple[InstructionCycles, ...]] = {}


def kernel_cost(kernel: ir.KernelIR) -> KernelCost:
    """Cycles per engine of one launch: every instruction times its loops' trip counts, times
    the grid size (grid instances run one after another on the one core). On a logical
    NeuronCore of two (``kernel.lnc``, LNC=2) the cores run their halves of the grid at once,
    so the launch takes the time of one core's programs."""
    total = KernelCost()
    parts: list[InstructionCycles] = []
    programs = math.prod(kernel.grid) if kernel.grid else 1
    if kernel.lnc:
        programs = -(-programs // kernel.lnc[2])
    _add_body(kernel.body, kernel.tensors, programs, total, parts)
    total.pop(NONE, None)
    total.parts = {engine: tuple(p for p in parts if p.engine == engine) for engine in total}
    return total


def _bytes(ins: ir.Instruction, tensors: dict[str, ir.TensorDecl]) -> int:
    return sum(math.prod(a.shape) * itemsize(tensors[a.tensor].dtype)
               for a in _accesses(ins) if a.tensor in tensors)


def _add_body(body: list[Any], tensors: dict[str, ir.TensorDecl], times: int, total: Cost,
              parts: list[InstructionCycles]) -> None:
    for st in body:
        if isinstance(st, ir.Loop):
            # A data-dependent loop's trip count is data (extent 0): its body counts once.
            _add_body(st.body, tensors, times * (1 if st.data_dependent else st.extent), total, parts)
            continue
        cost = OP_COST.get(st.op, ENGINE_COST[spec(st.op).engine_of(st.attrs)])(st, tensors)
        for engine, cycles in cost.items():
            total[engine] = total.get(engine, 0.0) + cycles * times
            parts.append(InstructionCycles(st.op, engine, cycles * times, times, _bytes(st, tensors),
                                           str(st.loc) if st.loc else ""))
