"""LiteralProto <-> NumPy arrays.

Constants reach the compiler as LiteralProto, whose data sits in a different field per element type
(repeated numbers for 32/64-bit types, little-endian bytes for the narrow ones) and in the order of
the literal's layout. One table maps each element type to its field and wire encoding, so decoding
and encoding cannot drift apart.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from hlo.errors import HloError
from hlo.ir.dtypes import element_type_of, numpy_dtype
from hlo.ir.shape import Shape
from hlo.schema import xla_data_pb2 as xd


class _Field(NamedTuple):
    name: str
    packed_bytes: bool  # stored as little-endian raw bytes rather than a repeated number field
    wire_dtype: np.dtype | None = None  # dtype of the repeated field's numbers when it differs


_FIELDS: dict[str, _Field] = {
    "PRED": _Field("preds", False, np.dtype(np.bool_)),
    "S32": _Field("s32s", False), "S64": _Field("s64s", False),
    "U32": _Field("u32s", False), "U64": _Field("u64s", False),
    "F32": _Field("f32s", False), "F64": _Field("f64s", False),
    "C64": _Field("c64s", False, np.dtype(np.float32)), "C128": _Field("c128s", False, np.dtype(np.float64)),
    **{t: _Field(f, True) for t, f in {
        "S1": "s1s", "S2": "s2s", "S4": "s4s", "S8": "s8s", "S16": "s16s",
        "U1": "u1s", "U2": "u2s", "U4": "u4s", "U8": "u8s", "U16": "u16s",
        "F16": "f16s", "BF16": "bf16s", "F8E5M2": "f8e5m2s", "F8E4M3": "f8e4m3s", "F8E4M3FN": "f8e4m3fns",
        "F8E4M3B11FNUZ": "f8e4m3b11fnuzs", "F8E3M4": "f8e3m4s", "F8E5M2FNUZ": "f8e5m2fnuzs",
        "F8E4M3FNUZ": "f8e4m3fnuzs", "F4E2M1FN": "f4e2m1fns", "F8E8M0FNU": "f8e8m0fnus",
        "F6E3M2FN": "f6e3m2fns", "F6E2M3FN": "f6e2m3fns",
    }.items()},
}


def _physical_order(shape: Shape) -> tuple[int, ...]:
    """Dimensions from major to minor as the data lies in memory (row-major without a layout)."""
    if shape.layout is not None and len(shape.layout.minor_to_major) == shape.rank:
        return tuple(reversed(shape.layout.minor_to_major))
    return tuple(range(shape.rank))


def literal_to_numpy(literal: xd.LiteralProto, where: str = "literal") -> np.ndarray | tuple:
    """The value of a literal: an array of its shape, or a tuple of values for a tuple literal."""
    shape = Shape.from_proto(literal.shape)
    if shape.is_tuple:
        return tuple(literal_to_numpy(t, where) for t in literal.tuple_literals)
    if shape.element_type not in _FIELDS:
        raise HloError(f"{where}: literals of element type {shape.element_type} are not supported")
    field = _FIELDS[shape.element_type]
    dtype = numpy_dtype(shape.element_type)
    raw = getattr(literal, field.name)
    count = shape.num_elements
    if field.packed_bytes:
        flat = np.frombuffer(raw, dtype=dtype.newbyteorder("<") if dtype.itemsize > 1 else dtype)
    else:
        flat = np.asarray(raw, dtype=field.wire_dtype or dtype)
        if shape.element_type in ("C64", "C128"):
            flat = flat.view(dtype) if flat.size else flat.astype(dtype)
    if flat.size != count:
        raise HloError(f"{where}: {shape} needs {count} elements but the literal holds {flat.size}")
    order = _physical_order(shape)
    physical = flat.astype(dtype, copy=False).reshape([shape.dimensions[d] for d in order])
    return np.transpose(physical, np.argsort(order)).copy() if order != tuple(range(shape.rank)) else physical.copy()


def numpy_to_literal(value: np.ndarray | tuple, shape: Shape | None = None) -> xd.LiteralProto:
    """A literal holding `value` (row-major unless `shape` says another layout)."""
    lit = xd.LiteralProto()
    if isinstance(value, tuple):
        shapes = shape.tuple_shapes if shape is not None else (None,) * len(value)
        parts = [numpy_to_literal(v, s) for v, s in zip(value, shapes)]
        Shape.tuple_of([Shape.from_proto(p.shape) for p in parts]).to_proto(lit.shape)
        for p in parts:
            lit.tuple_literals.add().CopyFrom(p)
        return lit
    array = np.asarray(value)
    if shape is None:
        shape = Shape.array(element_type_of(array.dtype), array.shape)
    shape.to_proto(lit.shape)
    field = _FIELDS[shape.element_type]
    physical = np.transpose(array, _physical_order(shape)).astype(shape.dtype, copy=False)
    if field.packed_bytes:
        setattr(lit, field.name, np.ascontiguousarray(physical).astype(physical.dtype.newbyteorder("<")).tobytes())
    else:
        flat = physical.reshape(-1)
        if shape.element_type in ("C64", "C128"):
            flat = np.ascontiguousarray(flat).view(field.wire_dtype)
        getattr(lit, field.name).extend(flat.tolist())
    return lit
