"""Element-wise HLO opcodes -> element-wise emulator ops (one to one)."""
from __future__ import annotations

from typing import Any

from neuron_customcall.compiler.errors import CompileError
from neuron_customcall.compiler.lowering.context import LowerCtx

UNARY = {
    "abs": "abs", "negate": "negate", "exponential": "exp", "exponential-minus-one": "expm1", "log": "log",
    "log-plus-one": "log1p", "sqrt": "sqrt", "rsqrt": "rsqrt", "cbrt": "cbrt", "tanh": "tanh",
    "logistic": "logistic", "sine": "sine", "cosine": "cosine", "tan": "tan", "floor": "floor", "ceil": "ceil",
    "round-nearest-afz": "round_afz", "round-nearest-even": "round_even", "sign": "sign", "not": "not",
    "is-finite": "is_finite", "popcnt": "popcnt", "count-leading-zeros": "clz", "erf": "erf", "real": "real",
    "imag": "imag", "copy": "copy",
}
BINARY = {
    "add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "divide", "remainder": "remainder",
    "maximum": "maximum", "minimum": "minimum", "power": "power", "atan2": "atan2", "and": "and", "or": "or",
    "xor": "xor", "shift-left": "shift_left", "shift-right-arithmetic": "shift_right_arithmetic",
    "shift-right-logical": "shift_right_logical", "complex": "complex",
}
_DIRECTIONS = {"EQ", "NE", "LT", "LE", "GT", "GE"}
_COMPARISON_TYPES = {"", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"}


def _simple(op: str):  # noqa: ANN202
    def lower(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
        return op, {}
    return lower


def _compare(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    direction = inst.attributes.comparison_direction
    ctype = inst.attributes.comparison_type
    if direction not in _DIRECTIONS:
        raise CompileError(f"unsupported comparison direction {direction!r}", inst)
    if ctype not in _COMPARISON_TYPES:
        raise CompileError(f"unsupported comparison type {ctype!r}", inst)
    return "compare", {"direction": direction, "total_order": ctype == "TOTALORDER"}


LOWERINGS = {
    **{k: _simple(v) for k, v in UNARY.items()},
    **{k: _simple(v) for k, v in BINARY.items()},
    "compare": _compare, "select": _simple("select"), "clamp": _simple("clamp"),
}
