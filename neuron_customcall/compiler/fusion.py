"""Layout fusion: a dot whose only user is a transpose computes the transposed result directly.

Why: NumPy, like XLA:CPU, pays dearly for element-wise work on a transposed (strided) view, and
JAX's backward pass transposes weight gradients (`dot(x^T, dy)` then `transpose`) right before
the optimizer's element-wise update. XLA avoids the copy by choosing the dot's output layout; we
do the same by giving the dot an output permutation (computed as y^T @ x^T by BLAS, for free) and
turning the transpose into a copy of its (already permuted) operand.
"""
from __future__ import annotations

from typing import Any

from neuron_customcall.compiler.lowering.context import LowerCtx


def fuse_dot_transposes(comp: Any, order: list[Any], ctx: LowerCtx) -> None:
    users: dict[int, int] = {}
    for inst in order:
        for o in inst.operands:
            users[id(o)] = users.get(id(o), 0) + 1
    for inst in order:
        if inst.opcode != "transpose" or not inst.operands:
            continue
        dot = inst.operands[0]
        if dot.opcode != "dot" or users.get(id(dot)) != 1 or dot is comp.root or id(dot) in ctx.fused_transposes:
            continue
        ctx.fused_transposes[id(dot)] = list(inst.attributes.dimensions)
        ctx.absorbed.add(id(inst))
        ctx.type_override[id(dot)] = inst.shape
