"""Which ops a fused native region may hold, and the C expression of each: one table.

Why a table of its own and not a flag on the op spec alone: whether an op fuses depends on its
element types too (XLA's integer division, narrow floats computed in f32, complex numbers and
transcendental functions are left to NumPy), and the C expression must give *bit for bit* what
the op's NumPy handler gives (emulator.ops), since a program runs on NumPy until its native
module is ready and on native code after. Every entry here is exactly rounded in IEEE arithmetic
(+ - * /, negation, comparisons, selection, conversions, bitwise logic), or a rule copied from
the handler it replaces (integer maximum/minimum; float->int conversion: XLA's saturation with
NaN -> 0, as emulator.ops.convert.float_to_int). Float maximum/minimum are left to NumPy (see
`_extreme`).

Transcendental ops (exp, log, tanh...) are not here: NumPy's vectorised libm differs from the C
library's in the last bit for some arguments, so fusing them would change results at the swap.

A builder takes (attributes, operand dtypes, result dtype, operand C expressions) and returns the
C expression, or None when the op with these types is not fusible.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

#: dtype -> (C type, C unsigned type of the same width for wrapping arithmetic)
CTYPES: dict[np.dtype, tuple[str, str]] = {
    np.dtype(np.float32): ("float", ""), np.dtype(np.float64): ("double", ""),
    np.dtype(np.int8): ("int8_t", "uint8_t"), np.dtype(np.int16): ("int16_t", "uint16_t"),
    np.dtype(np.int32): ("int32_t", "uint32_t"), np.dtype(np.int64): ("int64_t", "uint64_t"),
    np.dtype(np.uint8): ("uint8_t", "uint8_t"), np.dtype(np.uint16): ("uint16_t", "uint16_t"),
    np.dtype(np.uint32): ("uint32_t", "uint32_t"), np.dtype(np.uint64): ("uint64_t", "uint64_t"),
    np.dtype(np.bool_): ("npy_bool", "uint8_t"),
}

Builder = Callable[[dict[str, Any], Sequence[np.dtype], np.dtype, Sequence[str]], "str | None"]

_BOOL = np.dtype(np.bool_)


def ctype(dt: np.dtype) -> str:
    return CTYPES[dt][0]


def _same(ins: Sequence[np.dtype], out: np.dtype) -> bool:
    return all(d == out for d in ins) and out in CTYPES


def _is_float(dt: np.dtype) -> bool:
    return dt.kind == "f" and dt in CTYPES


def _is_int(dt: np.dtype) -> bool:
    return dt.kind in "iu" and dt in CTYPES


def _arith(symbol: str, ints: bool) -> Builder:
    """a OP b in the result type; integers wrap (computed unsigned: signed overflow is undefined
    in C, NumPy wraps)."""
    def build(attrs: dict[str, Any], ins: Sequence[np.dtype], out: np.dtype, a: Sequence[str]) -> str | None:
        if not _same(ins, out) or out == _BOOL:
            return None
        if _is_float(out):
            return f"({a[0]} {symbol} {a[1]})"
        if ints and _is_int(out):
            t, u = CTYPES[out]
            return f"(({t})(({u}){a[0]} {symbol} ({u}){a[1]}))"
        return None
    return build


def _negate(attrs: dict[str, Any], ins: Sequence[np.dtype], out: np.dtype, a: Sequence[str]) -> str | None:
    if not _same(ins, out) or out == _BOOL:
        return None
    if _is_float(out):
        return f"(-{a[0]})"  # flips the sign bit, as np.negative (NaNs and zeros included)
    t, u = CTYPES[out]
    return f"(({t})(({u})0 - ({u}){a[0]}))"


def _abs(attrs: dict[str, Any], ins: Sequence[np.dtype], out: np.dtype, a: Sequence[str]) -> str | None:
    # floats only: np.abs clears the sign bit (of -0 and NaNs too), as fabs does
    if not _same(ins, out) or not _is_float(out):
        return None
    return f"fabs{'f' if out == np.float32 else ''}({a[0]})"


def _extreme(greater: bool) -> Builder:
    """np.maximum / np.minimum of integers. Not of floats: under the run's FTZ/DAZ mode
    (emulator.fpenv) NumPy's vectorised loop returns a subnormal operand flushed to zero (the
    SSE/AVX max instruction reads it as zero) while its scalar loop for the last elements copies
    it, so no single C expression gives its bits everywhere."""
    cmp = ">" if greater else "<"

    def build(attrs: dict[str, Any], ins: Sequence[np.dtype], out: np.dtype, a: Sequence[str]) -> str | None:
        if not _same(ins, out) or not _is_int(out):
            return None
        return f"(({a[0]} {cmp} {a[1]}) ? {a[0]} : {a[1]})"
    return build


_COMPARE = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}


def _compare(attrs: dict[str, Any], ins: Sequence[np.dtype], out: np.dtype, a: Sequence[str]) -> str | None:
    # TOTALORDER orders NaNs and signed zeros by their bits: left to NumPy
    if attrs.get("total_order") or out != _BOOL or ins[0] != ins[1] or ins[0] not in CTYPES:
        return None
    symbol = _COMPARE.get(attrs.get("direction", ""))
    if symbol is None:
        return None
    if ins[0] == _BOOL:
        return f"((npy_bool)(({a[0]} != 0) {symbol} ({a[1]} != 0)))"
    return f"((npy_bool)({a[0]} {symbol} {a[1]}))"


def _select(attrs: dict[str, Any], ins: Sequence[np.dtype], out: np.dtype, a: Sequence[str]) -> str | None:
    if ins[0] != _BOOL or ins[1] != out or ins[2] != out or out not in CTYPES:
        return None
    return f"({a[0]} ? {a[1]} : {a[2]})"  # a copy of the chosen operand's bits


def _logic(symbol: str, logical: str) -> Builder:
    """Bitwise on integers, logical on predicates (np.logical_*: any non-zero byte is true)."""
    def build(attrs: dict[str, Any], ins: Sequence[np.dtype], out: np.dtype, a: Sequence[str]) -> str | None:
        if not _same(ins, out):
            return None
        if out == _BOOL:
            return f"((npy_bool)(({a[0]} != 0) {logical} ({a[1]} != 0)))"
        if _is_int(out):
            t, u = CTYPES[out]
            return f"(({t})(({u}){a[0]} {symbol} ({u}){a[1]}))"
        return None
    return build


def _not(attrs: dict[str, Any], ins: Sequence[np.dtype], out: np.dtype, a: Sequence[str]) -> str | None:
    if not _same(ins, out):
        return None
    if out == _BOOL:
        return f"((npy_bool)({a[0]} == 0))"
    if _is_int(out):
        t, u = CTYPES[out]
        return f"(({t})(~({u}){a[0]}))"
    return None


def _literal_float(value: float, dt: np.dtype) -> str:
    """An exactly representable float value as a C constant of type `dt` (hex: no rounding)."""
    return f"(({ctype(dt)}){float(value).hex()})"


def _int_literal(value: int, dt: np.dtype) -> str:
    """An integer constant of type `dt` in C (the most negative 64-bit value has no literal)."""
    if value < 0:
        return f"(({ctype(dt)})(-{-value - 1}LL - 1))"
    return f"(({ctype(dt)}){value}ULL)"


def _convert(attrs: dict[str, Any], ins: Sequence[np.dtype], out: np.dtype, a: Sequence[str]) -> str | None:
    src = ins[0]
    if src not in CTYPES or out not in CTYPES:
        return None
    x = a[0]
    if src == out:
        return x
    if out == _BOOL:
        return f"((npy_bool)({x} != 0))"  # NaN != 0: true, as NumPy
    if src == _BOOL:
        return f"(({ctype(out)})({x} != 0))"
    if _is_int(out) and _is_float(src):
        info = np.iinfo(out)
        hi = _literal_float(float(info.max) + 1.0, src)  # a power of two: exact in either float type
        lo = _literal_float(float(info.min), src)
        t = ctype(out)
        return (f"(({x}) != ({x}) ? ({t})0 : ({x}) >= {hi} ? {_int_literal(info.max, out)}"
                f" : ({x}) < {lo} ? {_int_literal(info.min, out)} : ({t})({x}))")
    # float <-> float, int -> float (round to nearest, as NumPy's cast), int -> int (wraps)
    if _is_int(out) and _is_int(src):
        return f"(({ctype(out)})({CTYPES[out][1]})({x}))"
    return f"(({ctype(out)})({x}))"


#: op name -> C expression builder: the ops a fused native region may hold (see the docstring).
EXPRESSIONS: dict[str, Builder] = {
    "add": _arith("+", True), "subtract": _arith("-", True), "multiply": _arith("*", True),
    "divide": _arith("/", False), "negate": _negate, "abs": _abs, "maximum": _extreme(True),
    "minimum": _extreme(False), "compare": _compare, "select": _select, "and": _logic("&", "&&"),
    "or": _logic("|", "||"), "xor": _logic("^", "!="), "not": _not, "convert": _convert,
}


def expression(op: str, attrs: dict[str, Any], ins: Sequence[np.dtype], out: np.dtype,
               args: Sequence[str]) -> str | None:
    """The C expression of `op` over `args`, or None when the op with these types is not fusible."""
    build = EXPRESSIONS.get(op)
    return None if build is None else build(attrs, ins, out, args)
