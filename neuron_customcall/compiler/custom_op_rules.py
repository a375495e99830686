"""The model-wide limits AWS documents for C++ custom operators, checked on the whole module.

"Each model can only have one CustomOp library ... However, models using torch.sort cannot have
any CustomOps" (Custom C++ Operators API reference, "Library Limitations"; the developer guide
repeats it). On a NeuronCore both come from the GpSimd engine: it loads one custom-op library per
model, and the runtime's sort runs on that engine too. The emulator could run either model, so
without this check a model would pass here and fail on the device; the error names the rule, the
libraries and the instructions. NKI kernels are not CustomOps and are not counted.
"""
from __future__ import annotations

import hashlib
from typing import Any

from emulator import kernel_payload
from neuron_customcall.compiler.errors import CompileError

__all__ = ["check_custom_op_limits"]

_RULE = "(AWS Custom C++ Operators API reference, 'Library Limitations')"


def _gpsimd_ops(ctx: Any) -> list[tuple[str, str]]:
    """(op name as called, SHA-256 of its library) of every C++ custom op in the module."""
    libs = kernel_payload.libraries((k.kind, k.data) for k in ctx.kernels)
    ops = []
    for k in ctx.kernels:
        if k.kind == kernel_payload.GPSIMD_OP:
            payload = kernel_payload.unpack_gpsimd_op(k.data, libs)
            ops.append((f"{payload.op.library}::{payload.op.name}",
                        hashlib.sha256(payload.library).hexdigest()))
    return ops


def _sorts(ctx: Any) -> list[Any]:
    return [inst for comp in ctx.module.computations for inst in comp.instructions if inst.opcode == "sort"]


def check_custom_op_limits(ctx: Any) -> None:
    """CompileError if the lowered module breaks a documented custom-op limit."""
    ops = _gpsimd_ops(ctx)
    if not ops:
        return
    by_library: dict[str, list[str]] = {}
    for name, digest in ops:
        by_library.setdefault(digest, []).append(name)
    if len(by_library) > 1:
        names = "; ".join(", ".join(sorted(set(v))) for v in by_library.values())
        raise CompileError(f"the model calls C++ custom ops from {len(by_library)} libraries ({names}): each model "
                           f"can only have one CustomOp library {_RULE}; register the ops in one NEURON_LIBRARY")
    sorts = _sorts(ctx)
    if sorts:
        raise CompileError(f"the model sorts (instruction '{sorts[0].name}') and calls the C++ custom op "
                           f"{ops[0][0]}: models using torch.sort cannot have any CustomOps {_RULE}", sorts[0])
