"""Element-wise HLO opcodes: all but compare and stochastic-convert are lowered generically
(registry.py) to the emulator op of the same name. Their shape rules: operands of the result's
shape (select: or a scalar predicate)."""
from __future__ import annotations

from typing import Any

import numpy as np

from hlo.ir.dtypes import bit_width
from hlo.opcodes import ELEMENTWISE, OPCODES
from neuron_customcall.compiler.errors import CompileError
from neuron_customcall.compiler.lowering.context import LowerCtx
from neuron_customcall.compiler.lowering.registry import fail, leaf_types, lowers, shape_dims, shape_rule, shapes
from neuron_customcall.compiler.subbyte import element_types

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


@lowers("stochastic-convert")
def _stochastic_convert(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    """The result's width as written: an s4 result is computed in s8 with s4's bounds."""
    return "stochastic-convert", {"bits": bit_width(element_types(inst)[1])}


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
    if _record.cls == ELEMENTWISE and _record.arity in (1, 2) and _opcode != "stochastic-convert":
        shape_rule(_opcode)(_same_shapes)


@shape_rule("stochastic-convert")
def _stochastic_convert_shapes(inst: Any) -> None:
    """XLA's shape inference: a float operand and an unsigned random operand of its bit width and
    dimensions. XLA decomposes it only to signed integers (its own error for any other result)."""
    (x, random), out = shapes(inst)
    x_type, random_type = element_types(inst)[0]  # u4 random operands are computed in 8 bits
    if x.is_tuple or random.is_tuple or shape_dims(x) != shape_dims(out) or shape_dims(random) != shape_dims(out):
        fail(inst, f"stochastic-convert operands {x}, {random} do not match the result {out}")
    if np.dtype(x.dtype).kind not in "fV":
        fail(inst, f"stochastic-convert of {x.element_type}: the operand must be a float type")
    if not random_type.startswith("U") or bit_width(random_type) != bit_width(x_type):
        fail(inst, f"stochastic-convert of {x_type} needs an unsigned random operand of {bit_width(x_type)} bits, "
                   f"not {random_type}")
    if not element_types(inst)[1].startswith("S"):
        fail(inst, f"stochastic-convert to {out.element_type} is not supported: XLA defines it for signed integer "
                   "results only")


@shape_rule("select")
def _select_shapes(inst: Any) -> None:
    ops, out = shapes(inst)
    if any(o.is_tuple for o in ops):
        fail(inst, "select of tuples is not supported")
    if shape_dims(ops[0]) not in ((), shape_dims(out)) or shape_dims(ops[1]) != shape_dims(out) or shape_dims(ops[2]) != shape_dims(out):
        fail(inst, f"select operand shapes {[str(s) for s in ops]} do not match the result {out}")
