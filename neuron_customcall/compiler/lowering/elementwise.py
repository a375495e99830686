"""Element-wise HLO opcodes: all but compare are lowered generically (registry.py) to the emulator
op of the same name. Their shape rules: operands of the result's shape (select: or a scalar
predicate)."""
from __future__ import annotations

from typing import Any

from hlo.opcodes import ELEMENTWISE, OPCODES
from neuron_customcall.compiler.errors import CompileError
from neuron_customcall.compiler.lowering.context import LowerCtx
from neuron_customcall.compiler.lowering.registry import fail, leaf_types, lowers, shape_dims, shape_rule, shapes

_DIRECTIONS = {"EQ", "NE", "LT", "LE", "GT", "GE"}
_COMPARISON_TYPES = {"", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"}


@lowers("compare")
def _compare(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    direction = inst.attributes.comparison_direction
    ctype = inst.attributes.comparison_type
    if direction not in _DIRECTIONS:
        raise CompileError(f"unsupported comparison direction {direction!r}", inst)
    if ctype not in _COMPARISON_TYPES:
        raise CompileError(f"unsupported comparison type {ctype!r}", inst)
    return "compare", {"direction": direction, "total_order": ctype == "TOTALORDER"}


# -- shape rules (XLA's; run by the verifier before lowering) ------------------------------
#: Binary element-wise opcodes whose operands need not share an element type.
_MIXED_TYPE_BINARY = frozenset({"complex", "compare"})


def _same_shapes(inst: Any) -> None:
    """Unary and binary element-wise opcodes: operands have the result's dimensions (and binary
    ones, but complex and compare, its element type); compare produces PRED; a copy of a tuple
    has its operand's tuple shape, leaf by leaf."""
    ops, out = shapes(inst)
    if inst.opcode == "copy" and ops[0].is_tuple:
        if leaf_types(ops[0]) != leaf_types(out):
            fail(inst, f"operand shape {ops[0]} does not match the result {out}")
        return
    for s in ops:
        if s.is_tuple or shape_dims(s) != shape_dims(out):
            fail(inst, f"operand shape {s} does not match the result {out}")
    if len(ops) == 2 and inst.opcode not in _MIXED_TYPE_BINARY and ops[0].element_type != ops[1].element_type:
        fail(inst, f"operand element types differ: {ops[0].element_type} vs {ops[1].element_type}")
    if inst.opcode == "compare" and out.element_type != "PRED":
        fail(inst, "compare must produce PRED")


for _opcode, _record in OPCODES.items():
    if _record.cls == ELEMENTWISE and _record.arity in (1, 2):
        shape_rule(_opcode)(_same_shapes)


@shape_rule("select")
def _select_shapes(inst: Any) -> None:
    ops, out = shapes(inst)
    if any(o.is_tuple for o in ops):
        fail(inst, "select of tuples is not supported")
    if shape_dims(ops[0]) not in ((), shape_dims(out)) or shape_dims(ops[1]) != shape_dims(out) or shape_dims(ops[2]) != shape_dims(out):
        fail(inst, f"select operand shapes {[str(s) for s in ops]} do not match the result {out}")
