"""Control flow: while, conditional, call -> sub-program references."""
from __future__ import annotations

from typing import Any

from neuron_customcall.compiler.errors import CompileError
from neuron_customcall.compiler.lowering.context import LowerCtx, called
from neuron_customcall.compiler.lowering.registry import fail, leaf_types, lowers, shape_rule, shapes


@lowers("while")
def _while(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    # XLA orders a while's computations (body, condition).
    body, cond = called(inst, 0, "body"), called(inst, 1, "condition")
    if cond.root.shape.element_type != "PRED":
        body, cond = cond, body
    return "while", {"cond": ctx.computation(cond, role="cond"), "body": ctx.computation(body, role="body")}


@lowers("conditional")
def _conditional(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    branches = inst.called_computations
    by_index = inst.operands[0].shape.element_type != "PRED"
    if not by_index and len(branches) != 2:
        raise CompileError("a predicated conditional needs two branches", inst)
    if len(inst.operands) != len(branches) + 1:
        raise CompileError(f"{len(branches)} branches but {len(inst.operands) - 1} branch operands", inst)
    return "conditional", {"branches": [ctx.computation(b) for b in branches], "by_index": by_index}


@lowers("call")
def _call(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return "call", {"computation": ctx.computation(called(inst, 0, "callee"))}


@lowers("fusion")
def _fusion(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    """A fusion (in HLO dumped after XLA's optimizations) computes its fused computation: a call."""
    return "call", {"computation": ctx.computation(called(inst, 0, "fused computation"))}


# -- shape rules (XLA's; run by the verifier before lowering) ------------------------------
@shape_rule("while")
def _while_shapes(inst: Any) -> None:
    ops, out = shapes(inst)
    body_out = inst.called_computations[0].root.shape if inst.called_computations else None
    if body_out is not None and body_out.element_type != "PRED" and \
            (leaf_types(body_out) != leaf_types(ops[0]) or leaf_types(out) != leaf_types(ops[0])):
        fail(inst, f"while body result {body_out} does not match its init {ops[0]}")


@shape_rule("conditional")
def _conditional_shapes(inst: Any) -> None:
    out = inst.shape
    for b in inst.called_computations:
        if leaf_types(b.root.shape) != leaf_types(out):
            fail(inst, f"branch {b.name} returns {b.root.shape}, the conditional {out}")
