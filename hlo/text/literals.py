"""Constants in HLO text (`constant({ {1, 2}, {3, 4} })`) <-> xla.LiteralProto.

Every element type of the schema is covered.  The proto stores each type where XLA's
`Literal::ToProto` puts it: `preds`, `s32s`/`s64s`/`u32s`/`u64s`, `f32s`/`f64s`, interleaved
`c64s`/`c128s`, and little-endian bytes for the 1- and 2-byte types (`s8s`, `u8s`, `s16s`, `u16s`,
`f16s`, `bf16s`, the fp8/fp6/fp4 types and the sub-byte integers, one element per byte).  Values are
converted with NumPy and ml_dtypes, so bf16/fp8 rounding is theirs.  Data is stored in the layout's
physical order, as XLA does; text always lists values in logical (row-major) order.  Where each
type's values live, and the encoding both ways, is hlo/ir/literal.py's table: this module is the
text grammar only.  An elided constant (`{...}`) keeps its shape and no values.

Sizes are checked before anything is allocated: a constant of more than MAX_ELEMENTS elements is
an error, whatever its text says.
"""
from __future__ import annotations

import logging
import math
from typing import Dict, List, Optional, Tuple

import ml_dtypes
import numpy as np

from hlo.ir.literal import STORAGE, LiteralStorage, is_elided, literal_to_numpy, store_array
from hlo.schema import xla_data_pb2
from hlo.text.cursor import Cursor, parse_float_text, parse_int_text
from hlo.text.lexer import WORD
from hlo.text.types import NAME_BY_TYPE

__all__ = ["parse_literal", "print_literal", "MAX_ELEMENTS", "format_float"]

log = logging.getLogger(__name__)

PT = xla_data_pb2.PrimitiveType
LiteralProto = xla_data_pb2.LiteralProto
ShapeProto = xla_data_pb2.ShapeProto

#: Largest constant (in elements) that the reader accepts.
MAX_ELEMENTS = 1 << 24


# Bit layout (exponent bits, mantissa bits) of IEEE-like float types, for NaN payloads.
_IEEE_BITS: Dict[int, Tuple[int, int, object]] = {
    PT.F16: (5, 10, np.uint16),
    PT.BF16: (8, 7, np.uint16),
    PT.F32: (8, 23, np.uint32),
    PT.F64: (11, 52, np.uint64),
}


def _num_elements(shape: ShapeProto) -> int:
    n = 1
    for d in shape.dimensions:
        if d < 0:
            return -1
        n *= d
        if n > MAX_ELEMENTS:
            return n
    return n


# -- parsing ---------------------------------------------------------------------------------------
def parse_literal(cur: Cursor, shape: ShapeProto) -> LiteralProto:
    """The literal of a constant of `shape` (inside `constant(...)`)."""
    with cur.nested():
        lit = LiteralProto()
        lit.shape.CopyFrom(shape)
        if shape.element_type == PT.TUPLE:
            cur.expect("(", "to open tuple literal")
            for i, sub in enumerate(shape.tuple_shapes):
                if i:
                    cur.expect(",", "between tuple literal elements")
                _skip_optional_shape(cur)
                lit.tuple_literals.append(parse_literal(cur, sub))
            cur.expect(")", "to close tuple literal")
            return lit
        if shape.element_type in (PT.TOKEN, PT.OPAQUE_TYPE):
            return lit
        storage = STORAGE.get(shape.element_type)
        if storage is None:
            raise cur.fail(f"constants of type {NAME_BY_TYPE.get(shape.element_type, '?')} are not supported")
        count = _num_elements(shape)
        if count < 0 or any(shape.is_dynamic_dimension):
            raise cur.fail("a constant cannot have a dynamic shape")
        if count > MAX_ELEMENTS:
            raise cur.fail(f"constant of more than {MAX_ELEMENTS} elements (the limit)")
        if _at_elided(cur):
            # XLA prints large constants as `{...}` by default. The values are not in the text, so
            # the literal keeps its shape and no data: printing writes `{...}` again, and reading
            # the value (hlo.ir.literal.literal_to_numpy) is an error that says so. No made-up data.
            log.info("constant of shape %s elided as {...} in the text: its values are unknown", list(shape.dimensions))
            return lit
        values: List[object] = []
        dims = list(shape.dimensions)
        if dims:
            _parse_nested(cur, dims, 0, storage, values)
        else:
            values.append(_parse_value(cur, storage))
        _store(lit, storage, values, shape, cur)
        return lit


def _at_elided(cur: Cursor) -> bool:
    """Is the next text `{...}`? (consumed if so)"""
    if not cur.at_punct("{"):
        return False
    mark = cur.lexer.save()
    cur.next()
    if cur.accept("...") and cur.accept("}"):
        return True
    cur.lexer.restore(mark)
    return False


def _skip_optional_shape(cur: Cursor) -> None:
    """Tuple literal elements may carry their shape in front (`(f32[2] {1, 2}, s32[] 3)`)."""
    from hlo.text.types import TYPE_BY_NAME  # local: only tuple constants need it

    tok = cur.peek()
    if tok.kind == WORD and tok.text in TYPE_BY_NAME:
        mark = cur.lexer.save()
        cur.next()
        if cur.accept("["):
            depth = 1
            while depth:
                t = cur.next()
                if t.kind == "eof":
                    raise cur.error("in tuple literal element shape", t, expected="']'")
                if t.text == "[":
                    depth += 1
                elif t.text == "]":
                    depth -= 1
            return
        cur.lexer.restore(mark)


def _parse_nested(cur: Cursor, dims: List[int], level: int, storage: LiteralStorage, out: List[object]) -> None:
    with cur.nested():
        cur.expect("{", f"to open dimension {level} of constant")
        size = dims[level]
        for i in range(size):
            if i:
                cur.expect(",", f"between elements of dimension {level} (it has {size})")
            if level + 1 < len(dims):
                _parse_nested(cur, dims, level + 1, storage, out)
            else:
                out.append(_parse_value(cur, storage))
        if size == 0 and level + 1 < len(dims) and cur.at_punct("{"):
            # XLA prints empty inner dimensions of a zero-size array, e.g. f32[0,2] {  }.
            pass
        cur.expect("}", f"after {size} elements of dimension {level}")


def _parse_value(cur: Cursor, storage: LiteralStorage) -> object:
    if storage.kind == "complex":
        cur.expect("(", "to open complex value")
        re_ = _parse_float_token(cur)
        cur.expect(",", "between real and imaginary parts")
        im = _parse_float_token(cur)
        cur.expect(")", "to close complex value")
        return complex(re_[0], im[0])
    tok = cur.peek()
    if tok.kind != WORD:
        raise cur.error("in constant", tok, expected="a value")
    if storage.kind == "pred":
        cur.next()
        if tok.text in ("true", "1"):
            return True
        if tok.text in ("false", "0"):
            return False
        raise cur.error("in pred constant", tok, expected="true or false")
    if storage.kind == "int":
        value = parse_int_text(tok.text)
        if value is None:
            if tok.text in ("true", "false"):
                value = int(tok.text == "true")
            else:
                raise cur.error("in integer constant", tok, expected="an integer")
        info = np.iinfo(storage.dtype) if not _is_subbyte(storage) else _subbyte_range(storage)
        if not info.min <= value <= info.max:
            raise cur.fail(f"value {tok.text} out of range for the constant's type", tok)
        cur.next()
        return value
    return _parse_float_token(cur)


def _parse_float_token(cur: Cursor) -> Tuple[float, Optional[int], bool]:
    """(value, nan payload or None, negative) of a float literal."""
    tok = cur.peek()
    if tok.kind == WORD:
        text = tok.text
        if text in ("true", "false"):
            cur.next()
            return (1.0 if text == "true" else 0.0, None, False)
        value = parse_float_text(text)
        as_int = parse_int_text(text)
        if as_int is not None:
            # XLA reads an integer spelling as an integer: "-0" is +0, as in XLA.
            value = float(as_int) if abs(as_int) < (1 << 1000) else value
        if value is not None:
            cur.next()
            payload = None
            low = text.lower()
            if "nan(" in low:
                try:
                    payload = int(low[low.index("(") + 1 : -1], 16)
                except ValueError:
                    raise cur.fail(f"bad NaN payload in '{text}'", tok) from None
            return (value, payload, low.startswith("-"))
    raise cur.error("in floating-point constant", tok, expected="a number")


class _Range:
    def __init__(self, lo: int, hi: int) -> None:
        self.min, self.max = lo, hi


def _is_subbyte(storage: LiteralStorage) -> bool:
    return storage.field in ("s1s", "u1s", "s2s", "u2s", "s4s", "u4s")


def _subbyte_range(storage: LiteralStorage) -> _Range:
    bits = int(storage.field[1])
    if storage.field[0] == "s":
        return _Range(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    return _Range(0, (1 << bits) - 1)


def _float_array(storage: LiteralStorage, values: List[object], element_type: int) -> np.ndarray:
    """Convert parsed float triples to the storage dtype, honouring NaN sign and payload."""
    arr = np.array([v[0] for v in values], dtype=np.float64)  # type: ignore[index]
    with np.errstate(all="ignore"):
        out = arr.astype(storage.dtype)
    bits_info = _IEEE_BITS.get(element_type)
    if bits_info is not None:
        ebits, mbits, utype = bits_info
        raw = out.view(utype)
        total = 1 + ebits + mbits
        for i, v in enumerate(values):
            value, payload, negative = v  # type: ignore[misc]
            if math.isnan(value):
                mant = payload if payload is not None else 1 << (mbits - 1)
                mant &= (1 << mbits) - 1
                if mant == 0:
                    mant = 1 << (mbits - 1)
                word = (((1 << ebits) - 1) << mbits) | mant
                if negative:
                    word |= 1 << (total - 1)
                raw[i] = word
    return out


def _store(lit: LiteralProto, storage: LiteralStorage, values: List[object], shape: ShapeProto, cur: Cursor) -> None:
    """Converts parsed values (logical order) to the element type and writes them into `lit`."""
    if storage.kind == "pred":
        arr = np.array(values, dtype=np.bool_)
    elif storage.kind == "int":
        arr = np.array(values, dtype=np.int64 if storage.dtype != np.uint64 else np.uint64)
        with np.errstate(all="ignore"):
            arr = arr.astype(storage.dtype)
    elif storage.kind == "complex":
        arr = np.array(values, dtype=np.complex128).astype(storage.dtype)
    else:
        arr = _float_array(storage, values, shape.element_type)
    store_array(lit, arr)


# -- printing --------------------------------------------------------------------------------------
def _format_float(value: object, element_type: int, dtype: object) -> str:
    f = float(value)  # type: ignore[arg-type]
    if math.isnan(f):
        text = "nan"
        bits_info = _IEEE_BITS.get(element_type)
        negative = False
        if bits_info is not None:
            ebits, mbits, utype = bits_info
            word = int(np.array([value], dtype=dtype).view(utype)[0])
            negative = bool(word >> (ebits + mbits))
            mant = word & ((1 << mbits) - 1)
            if mant != 1 << (mbits - 1):
                text = f"nan(0x{mant:x})"
        return ("-" if negative else "") + text
    if math.isinf(f):
        return "-inf" if f < 0 else "inf"
    if f == 0.0 and math.copysign(1.0, f) < 0:
        return "-0.0"  # XLA prints "-0", which every reader (XLA's too) takes as +0
    return format_float(f, dtype)


def format_float(f: float, dtype: object) -> str:
    """XLA's RoundTripFpToString: 6 significant digits when they read back to the same value of
    `dtype`, else the type's max_digits10 (9 for f32, 17 for f64...)."""
    target = np.array([f], dtype=dtype).tobytes()
    most = _max_digits10(dtype)
    # XLA: types with at most 6 significant digits (f16, bf16, fp8...) print with all of them
    for digits in ((most, 17) if most <= 6 else (6, most, 17)):
        s = "%.*g" % (digits, f)
        with np.errstate(all="ignore"):
            if np.array([float(s)], dtype=dtype).tobytes() == target:
                return s
    return repr(f)


def _max_digits10(dtype: object) -> int:
    try:
        mant = ml_dtypes.finfo(dtype).nmant
    except (TypeError, ValueError):
        return 17
    return int(math.ceil((mant + 1) * math.log10(2) + 1))


def _format_values(arr: np.ndarray, storage: LiteralStorage, element_type: int) -> List[str]:
    if storage.kind == "pred":  # XLA: `true` for a scalar, `1`/`0` inside arrays
        if arr.ndim == 0:
            return ["true" if arr.item() else "false"]
        return ["1" if v else "0" for v in arr.tolist()]
    arr = arr.reshape(-1)
    if storage.kind == "int":
        return [str(int(v)) for v in arr.astype(np.int64 if storage.dtype != np.uint64 else np.uint64).tolist()]
    if storage.kind == "complex":
        part = np.float32 if storage.dtype == np.complex64 else np.float64
        return [
            f"({_format_float(part(v.real), PT.F32 if part is np.float32 else PT.F64, part)}, "
            f"{_format_float(part(v.imag), PT.F32 if part is np.float32 else PT.F64, part)})"
            for v in arr.tolist()
        ]
    return [_format_float(v, element_type, storage.dtype) for v in arr]


def print_literal(lit: LiteralProto) -> str:
    """The text inside `constant(...)`: nested braces by rank, XLA's spelling of values."""
    shape = lit.shape
    if shape.element_type == PT.TUPLE:
        return "( " + ", ".join(print_literal(sub) for sub in lit.tuple_literals) + " )"
    if shape.element_type in (PT.TOKEN, PT.OPAQUE_TYPE):
        return ""
    storage = STORAGE.get(shape.element_type)
    if storage is None:
        raise ValueError(f"no text form for literal of element type {shape.element_type}")
    if is_elided(lit):
        return "{...}"
    arr = literal_to_numpy(lit, where="constant")
    words = _format_values(arr if arr.ndim == 0 else arr.reshape(-1), storage, shape.element_type)
    dims = list(shape.dimensions)
    if not dims:
        return words[0]
    pos = [0]

    # XLA: `{1, 2}` for rank 1; `{ { 1, 2 }, { 3, 4 } }` (spaces inside every brace) above
    open_, close = ("{", "}") if len(dims) == 1 else ("{ ", " }")

    def nest(level: int) -> str:
        if level == len(dims) - 1:
            items = words[pos[0] : pos[0] + dims[level]]
            pos[0] += dims[level]
            return open_ + ", ".join(items) + close if items else "{}"
        inner = [nest(level + 1) for _ in range(dims[level])]
        return open_ + ", ".join(inner) + close

    return nest(0)
