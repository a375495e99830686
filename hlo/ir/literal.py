"""LiteralProto <-> NumPy arrays: the one table of where each element type's data lives.

Constants reach the compiler as LiteralProto, whose data sits in a different field per element type,
where XLA's `Literal::ToProto` puts it: repeated numbers for `preds` and the 32/64-bit types,
interleaved real/imaginary for complex, little-endian bytes (one element per byte for the sub-byte
types) for the narrow ones, all in the order of the literal's layout. The HLO text grammar
(hlo/text/literals.py) and the IR (`HloInstruction.constant_value`) both go through this module, so
reading and writing cannot drift apart.

A literal whose shape has elements but whose data field is empty is an *elided* constant: HLO text
printed without large constants says `constant({...})`, and its values are simply not known.
Reading such a value is an error that says so, never made-up data.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hlo.errors import HloError
from hlo.ir.dtypes import NUMPY_DTYPES, element_type_of
from hlo.ir.shape import Shape
from hlo.schema import xla_data_pb2 as xd


@dataclass(frozen=True)
class LiteralStorage:
    """Where one element type's values live in LiteralProto and how they are encoded."""

    field: str  # the LiteralProto field holding the data
    dtype: np.dtype  # one element (little-endian for byte fields)
    kind: str  # "pred", "int", "float" or "complex": how text spells the values
    as_bytes: bool  # raw bytes field rather than a repeated number field


_BYTE_FIELDS = {
    "S1": "s1s", "S2": "s2s", "S4": "s4s", "S8": "s8s", "S16": "s16s",
    "U1": "u1s", "U2": "u2s", "U4": "u4s", "U8": "u8s", "U16": "u16s",
    "F16": "f16s", "BF16": "bf16s", "F8E5M2": "f8e5m2s", "F8E4M3": "f8e4m3s", "F8E4M3FN": "f8e4m3fns",
    "F8E4M3B11FNUZ": "f8e4m3b11fnuzs", "F8E3M4": "f8e3m4s", "F8E5M2FNUZ": "f8e5m2fnuzs",
    "F8E4M3FNUZ": "f8e4m3fnuzs", "F4E2M1FN": "f4e2m1fns", "F8E8M0FNU": "f8e8m0fnus",
    "F6E3M2FN": "f6e3m2fns", "F6E2M3FN": "f6e2m3fns",
}
_NUMBER_FIELDS = {"PRED": "preds", "S32": "s32s", "S64": "s64s", "U32": "u32s", "U64": "u64s",
                  "F32": "f32s", "F64": "f64s", "C64": "c64s", "C128": "c128s"}


def _kind(name: str) -> str:
    if name == "PRED":
        return "pred"
    if name[0] in "SU":
        return "int"
    return "complex" if name[0] == "C" else "float"


def _table() -> dict[int, LiteralStorage]:
    table: dict[int, LiteralStorage] = {}
    for name, field in {**_BYTE_FIELDS, **_NUMBER_FIELDS}.items():
        dtype = NUMPY_DTYPES[name]
        as_bytes = name in _BYTE_FIELDS
        table[xd.PrimitiveType.Value(name)] = LiteralStorage(
            field, dtype.newbyteorder("<") if as_bytes and dtype.itemsize > 1 else dtype, _kind(name), as_bytes)
    return table


#: PrimitiveType enum value -> storage, for every array element type a literal can hold.
STORAGE: dict[int, LiteralStorage] = _table()


def storage_for(element_type: int | str) -> LiteralStorage | None:
    """The storage of an element type (enum value or name), None for tuples, tokens and unknowns."""
    if isinstance(element_type, str):
        element_type = xd.PrimitiveType.Value(element_type) if element_type in xd.PrimitiveType.keys() else -1
    return STORAGE.get(element_type)


def _physical_order(shape: xd.ShapeProto) -> tuple[int, ...]:
    """Dimensions from major to minor as the data lies in memory (row-major without a layout)."""
    rank = len(shape.dimensions)
    if shape.HasField("layout") and len(shape.layout.minor_to_major) == rank:
        return tuple(reversed(shape.layout.minor_to_major))
    return tuple(range(rank))


def is_elided(lit: xd.LiteralProto) -> bool:
    """True for an array literal with elements but no data (`constant({...})` in HLO text)."""
    storage = STORAGE.get(lit.shape.element_type)
    if storage is None:
        return False
    return math.prod(lit.shape.dimensions) > 0 and len(getattr(lit, storage.field)) == 0


def store_array(lit: xd.LiteralProto, array: np.ndarray) -> None:
    """Writes `array` (logical order, the shape of `lit.shape`) into lit's data field."""
    storage = STORAGE[lit.shape.element_type]
    dims = tuple(lit.shape.dimensions)
    logical = np.asarray(array).astype(storage.dtype, copy=False).reshape(dims)
    order = _physical_order(lit.shape)
    physical = np.ascontiguousarray(np.transpose(logical, order) if order != tuple(range(len(dims))) else logical)
    lit.ClearField(storage.field)
    if storage.as_bytes:
        setattr(lit, storage.field, physical.tobytes())
    elif storage.kind == "complex":
        getattr(lit, storage.field).extend(physical.reshape(-1).view(physical.real.dtype).tolist())
    else:
        getattr(lit, storage.field).extend(physical.reshape(-1).tolist())


def literal_to_numpy(literal: xd.LiteralProto, where: str = "literal") -> np.ndarray | tuple:
    """The value of a literal: an array of its shape, or a tuple of values for a tuple literal."""
    shape = literal.shape
    if shape.element_type == xd.TUPLE:
        return tuple(literal_to_numpy(t, where) for t in literal.tuple_literals)
    storage = STORAGE.get(shape.element_type)
    if storage is None:
        raise HloError(f"{where}: literals of element type {xd.PrimitiveType.Name(shape.element_type)} hold no array")
    dims = tuple(shape.dimensions)
    count = math.prod(dims)
    if any(d < 0 for d in dims):
        raise HloError(f"{where}: a literal cannot have negative dimensions {list(dims)}")
    if is_elided(literal):
        raise HloError(f"{where}: the values of this constant were elided ({{...}}) in the HLO text it was "
                       "read from; dump the module with its large constants (JAX: "
                       "as_hlo_text(print_large_constants=True); XLA: --xla_dump_large_constants), or "
                       "use the binary or protobuf-text form")
    raw = getattr(literal, storage.field)
    if storage.as_bytes:
        if len(raw) != count * storage.dtype.itemsize:
            raise HloError(f"{where}: {count} elements need {count * storage.dtype.itemsize} bytes but the literal holds {len(raw)}")
        flat = np.frombuffer(raw, dtype=storage.dtype)
    elif storage.kind == "complex":
        parts = np.asarray(raw, dtype=np.dtype(storage.dtype).type(0).real.dtype)
        if parts.size != 2 * count:
            raise HloError(f"{where}: {count} complex elements need {2 * count} numbers but the literal holds {parts.size}")
        flat = parts.view(storage.dtype)
    else:
        flat = np.asarray(raw, dtype=storage.dtype)
    if flat.size != count:
        raise HloError(f"{where}: {Shape.from_proto(shape)} needs {count} elements but the literal holds {flat.size}")
    order = _physical_order(shape)
    physical = flat.reshape([dims[d] for d in order])
    native = NUMPY_DTYPES[xd.PrimitiveType.Name(shape.element_type)]
    value = np.transpose(physical, np.argsort(order)) if order != tuple(range(len(dims))) else physical
    return np.array(value, dtype=native)  # a writable, native-endian copy


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
    store_array(lit, array)
    return lit
