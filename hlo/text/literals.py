"""Constants in HLO text (`constant({ {1, 2}, {3, 4} })`) <-> xla.LiteralProto.

Every element type of the schema is covered.  The proto stores each type where XLA's
`Literal::ToProto` puts it: `preds`, `s32s`/`s64s`/`u32s`/`u64s`, `f32s`/`f64s`, interleaved
`c64s`/`c128s`, and little-endian bytes for the 1- and 2-byte types (`s8s`, `u8s`, `s16s`, `u16s`,
`f16s`, `bf16s`, the fp8/fp6/fp4 types and the sub-byte integers, one element per byte).  Values are
converted with NumPy and ml_dtypes, so bf16/fp8 rounding is theirs.  Data is stored in the layout's
physical order, as XLA does; text always lists values in logical (row-major) order.

Sizes are checked before anything is allocated: a constant of more than MAX_ELEMENTS elements is
an error, whatever its text says.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import ml_dtypes
import numpy as np

from hlo.schema import xla_data_pb2
from hlo.text.cursor import Cursor, parse_float_text, parse_int_text
from hlo.text.lexer import WORD
from hlo.text.types import NAME_BY_TYPE

__all__ = ["parse_literal", "print_literal", "MAX_ELEMENTS", "literal_to_numpy", "format_float"]

log = logging.getLogger(__name__)

PT = xla_data_pb2.PrimitiveType
LiteralProto = xla_data_pb2.LiteralProto
ShapeProto = xla_data_pb2.ShapeProto

#: Largest constant (in elements) that the reader accepts.
MAX_ELEMENTS = 1 << 24
#: Largest elided constant (`{...}`, no values in the text) that the reader fills with zeros.
MAX_ELIDED_ELEMENTS = 1 << 20


@dataclass(frozen=True)
class _Storage:
    """Where one element type lives in LiteralProto and how it converts."""

    field: str
    dtype: object  # numpy dtype of one element
    kind: str  # "pred", "int", "float", "complex"
    as_bytes: bool  # stored as a bytes field (vs a repeated numeric field)


def _storage_table() -> Dict[int, _Storage]:
    t: Dict[int, _Storage] = {
        PT.PRED: _Storage("preds", np.bool_, "pred", False),
        PT.S8: _Storage("s8s", np.int8, "int", True),
        PT.U8: _Storage("u8s", np.uint8, "int", True),
        PT.S16: _Storage("s16s", np.dtype("<i2"), "int", True),
        PT.U16: _Storage("u16s", np.dtype("<u2"), "int", True),
        PT.S32: _Storage("s32s", np.int32, "int", False),
        PT.U32: _Storage("u32s", np.uint32, "int", False),
        PT.S64: _Storage("s64s", np.int64, "int", False),
        PT.U64: _Storage("u64s", np.uint64, "int", False),
        PT.F16: _Storage("f16s", np.dtype("<f2"), "float", True),
        PT.BF16: _Storage("bf16s", ml_dtypes.bfloat16, "float", True),
        PT.F32: _Storage("f32s", np.float32, "float", False),
        PT.F64: _Storage("f64s", np.float64, "float", False),
        PT.C64: _Storage("c64s", np.complex64, "complex", False),
        PT.C128: _Storage("c128s", np.complex128, "complex", False),
    }
    optional = {
        "S1": ("s1s", "int1", "int"), "U1": ("u1s", "uint1", "int"),
        "S2": ("s2s", "int2", "int"), "U2": ("u2s", "uint2", "int"),
        "S4": ("s4s", "int4", "int"), "U4": ("u4s", "uint4", "int"),
        "F8E5M2": ("f8e5m2s", "float8_e5m2", "float"),
        "F8E4M3": ("f8e4m3s", "float8_e4m3", "float"),
        "F8E4M3FN": ("f8e4m3fns", "float8_e4m3fn", "float"),
        "F8E4M3B11FNUZ": ("f8e4m3b11fnuzs", "float8_e4m3b11fnuz", "float"),
        "F8E3M4": ("f8e3m4s", "float8_e3m4", "float"),
        "F8E5M2FNUZ": ("f8e5m2fnuzs", "float8_e5m2fnuz", "float"),
        "F8E4M3FNUZ": ("f8e4m3fnuzs", "float8_e4m3fnuz", "float"),
        "F4E2M1FN": ("f4e2m1fns", "float4_e2m1fn", "float"),
        "F8E8M0FNU": ("f8e8m0fnus", "float8_e8m0fnu", "float"),
        "F6E3M2FN": ("f6e3m2fns", "float6_e3m2fn", "float"),
        "F6E2M3FN": ("f6e2m3fns", "float6_e2m3fn", "float"),
    }
    fields = {f.name for f in LiteralProto.DESCRIPTOR.fields}
    for enum_name, (field, dtname, kind) in optional.items():
        if enum_name in PT.keys() and field in fields and hasattr(ml_dtypes, dtname):
            t[PT.Value(enum_name)] = _Storage(field, getattr(ml_dtypes, dtname), kind, True)
    return t


_STORAGE = _storage_table()
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
        storage = _STORAGE.get(shape.element_type)
        if storage is None:
            raise cur.fail(f"constants of type {NAME_BY_TYPE.get(shape.element_type, '?')} are not supported")
        count = _num_elements(shape)
        if count < 0 or any(shape.is_dynamic_dimension):
            raise cur.fail("a constant cannot have a dynamic shape")
        if count > MAX_ELEMENTS:
            raise cur.fail(f"constant of more than {MAX_ELEMENTS} elements (the limit)")
        if _at_elided(cur):
            # XLA prints large constants as `{...}` by default; its parser accepts that and makes
            # up values.  We accept it too (zeros) and say so: the real values are not in the text.
            # Five characters must not buy gigabytes: the made-up data has its own, lower bound.
            if count > MAX_ELIDED_ELEMENTS:
                raise cur.fail(f"elided constant '{{...}}' of more than {MAX_ELIDED_ELEMENTS} elements")
            log.warning("constant of shape %s elided as {...} in the text: read as zeros", list(shape.dimensions))
            values = [False if storage.kind == "pred" else 0 if storage.kind == "int" else
                      (0j if storage.kind == "complex" else (0.0, None, False))] * count
            _store(lit, storage, values, shape, cur)
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


def _parse_nested(cur: Cursor, dims: List[int], level: int, storage: _Storage, out: List[object]) -> None:
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


def _parse_value(cur: Cursor, storage: _Storage) -> object:
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


def _is_subbyte(storage: _Storage) -> bool:
    return storage.field in ("s1s", "u1s", "s2s", "u2s", "s4s", "u4s")


def _subbyte_range(storage: _Storage) -> _Range:
    bits = int(storage.field[1])
    if storage.field[0] == "s":
        return _Range(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    return _Range(0, (1 << bits) - 1)


def _float_array(storage: _Storage, values: List[object], element_type: int) -> np.ndarray:
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


def _store(lit: LiteralProto, storage: _Storage, values: List[object], shape: ShapeProto, cur: Cursor) -> None:
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
    arr = _to_physical(arr, shape)
    if storage.as_bytes:
        setattr(lit, storage.field, np.ascontiguousarray(arr).tobytes())
    elif storage.kind == "complex":
        flat = np.empty(arr.size * 2, dtype=arr.real.dtype)
        flat[0::2] = arr.real
        flat[1::2] = arr.imag
        getattr(lit, storage.field).extend(flat.tolist())
    else:
        getattr(lit, storage.field).extend(arr.tolist())


def _physical_perm(shape: ShapeProto) -> Optional[List[int]]:
    """Axis order (major to minor) of the layout when it is not the default; else None."""
    if not shape.HasField("layout") or len(shape.dimensions) < 2:
        return None
    m2m = list(shape.layout.minor_to_major)
    if len(m2m) != len(shape.dimensions):
        return None
    perm = m2m[::-1]
    return None if perm == list(range(len(perm))) else perm


def _to_physical(arr: np.ndarray, shape: ShapeProto) -> np.ndarray:
    perm = _physical_perm(shape)
    if perm is None:
        return arr
    return arr.reshape(list(shape.dimensions)).transpose(perm).ravel()


# -- reading values back out -----------------------------------------------------------------------
def literal_to_numpy(lit: LiteralProto) -> np.ndarray:
    """The array of a non-tuple literal, in logical (row-major) order; ValueError when malformed."""
    shape = lit.shape
    storage = _STORAGE.get(shape.element_type)
    if storage is None:
        raise ValueError(f"no array form for element type {shape.element_type}")
    count = _num_elements(shape)
    if count < 0 or count > MAX_ELEMENTS:
        raise ValueError("literal size out of range")
    raw = getattr(lit, storage.field)
    if storage.as_bytes:
        arr = np.frombuffer(raw, dtype=storage.dtype)
    elif storage.kind == "complex":
        flat = np.array(raw, dtype=np.float32 if storage.dtype == np.complex64 else np.float64)
        arr = np.empty(flat.size // 2, dtype=storage.dtype)
        arr.real = flat[0::2]
        arr.imag = flat[1::2]
    else:
        arr = np.array(raw, dtype=storage.dtype)
    if arr.size != count:
        raise ValueError(f"literal holds {arr.size} values for {count} elements")
    perm = _physical_perm(shape)
    dims = list(shape.dimensions)
    if perm is None:
        return arr.reshape(dims)
    physical = arr.reshape([dims[p] for p in perm])
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    return physical.transpose(inverse)


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


def _format_values(arr: np.ndarray, storage: _Storage, element_type: int) -> List[str]:
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
    storage = _STORAGE.get(shape.element_type)
    if storage is None:
        raise ValueError(f"no text form for literal of element type {shape.element_type}")
    arr = literal_to_numpy(lit)
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
