"""A traced NKI kernel batched along a new SPMD grid axis: what ``vmap`` of a kernel call runs.

Why a grid axis: the emulator executes the grid as batch dimensions of single NumPy operations,
so B kernel calls become one kernel whose programs are (original programs) x B, vectorised like
any grid, instead of B calls in a Python loop. The transformation is exact: every tensor that is
shared between the programs of one call (inputs, outputs, shared HBM scratch) gets a leading batch
dimension indexed by the new program id; private HBM is per program already; constants are read
only and stay shared; on-chip tiles belong to one program anyway.
"""
from __future__ import annotations

from dataclasses import replace

from emulator import machine
from emulator.kernel_ir import CONSTANT, INPUT, OUTPUT, Access, Instruction, KernelIR, Loop
from emulator.kernel_ir.ir import Affine, Statement


def _batched_tensors(ir: KernelIR) -> frozenset[str]:
    return frozenset(
        name for name, t in ir.tensors.items()
        if t.role != CONSTANT and (t.role in (INPUT, OUTPUT) or t.memory == machine.SHARED_HBM))


def batch_ir(ir: KernelIR, size: int) -> KernelIR:
    """``ir`` run ``size`` times at once: grid ``ir.grid + (size,)``, inputs and outputs with a
    leading dimension of ``size``."""
    batched = _batched_tensors(ir)
    index = Affine.make(0, {f"p{len(ir.grid)}": 1})

    def access(a: object) -> object:
        if isinstance(a, Access) and a.tensor in batched:
            return Access(a.tensor, a.shape, (index, *a.index))
        return a

    def statement(s: Statement) -> Statement:
        if isinstance(s, Loop):
            return replace(s, body=[statement(b) for b in s.body])
        assert isinstance(s, Instruction)
        return replace(s, dst=access(s.dst), srcs=tuple(access(x) for x in s.srcs), attrs=dict(s.attrs))

    tensors = {n: replace(t, shape=(size, *t.shape)) if n in batched else t for n, t in ir.tensors.items()}
    return KernelIR(ir.name, (*ir.grid, size), tensors, ir.inputs, ir.outputs,
                    [statement(s) for s in ir.body], ir.source, ir.version, dict(ir.constants))
