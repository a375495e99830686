"""Shapes and layouts of the in-memory IR.

Frozen and hashable so that the compiler can key tables by shape. The fields the compiler reads are
lifted into Python values; whatever else XLA's LayoutProto carries (tiling details, split configs,
physical shape, ...) rides along as the remaining message's bytes so that a proto -> IR -> proto
round trip loses nothing.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hlo.ir.dtypes import NON_ARRAY_TYPES, bit_width, numpy_dtype
from hlo.schema import xla_data_pb2 as xd


@dataclass(frozen=True)
class Layout:
    """A dense layout: the dimension order in memory plus tiling and memory space."""

    minor_to_major: tuple[int, ...]
    tiles: tuple[tuple[int, ...], ...] = ()
    memory_space: int = 0
    rest: bytes = b""  # the LayoutProto's other fields, serialised deterministically

    @classmethod
    def from_proto(cls, p: xd.LayoutProto) -> Layout:
        rest = xd.LayoutProto()
        rest.CopyFrom(p)
        for field in ("minor_to_major", "tiles", "memory_space"):
            rest.ClearField(field)
        return cls(
            minor_to_major=tuple(p.minor_to_major),
            tiles=tuple(tuple(t.dimensions) for t in p.tiles),
            memory_space=p.memory_space,
            rest=rest.SerializeToString(deterministic=True),
        )

    def to_proto(self) -> xd.LayoutProto:
        p = xd.LayoutProto()
        if self.rest:
            p.ParseFromString(self.rest)
        p.minor_to_major.extend(self.minor_to_major)
        for tile in self.tiles:
            p.tiles.add().dimensions.extend(tile)
        p.memory_space = self.memory_space
        return p

    def __str__(self) -> str:
        """HLO text's spelling, e.g. `{1,0:T(8,128)}` (one printer: hlo.text.shapes)."""
        from hlo.text.shapes import print_layout

        return print_layout(self.to_proto())


@dataclass(frozen=True)
class Shape:
    """An array shape (element type, dimensions, optional layout) or a tuple of shapes.

    `element_type` is XLA's PrimitiveType name ("F32", "PRED", "TUPLE", "TOKEN", ...), the same
    spelling the proto's enum uses, so no second naming scheme exists anywhere in the project.
    """

    element_type: str
    dimensions: tuple[int, ...] = ()
    layout: Layout | None = None
    tuple_shapes: tuple[Shape, ...] = ()
    is_dynamic_dimension: tuple[bool, ...] = ()

    # -- queries the compiler asks ------------------------------------------------------------
    @property
    def is_tuple(self) -> bool:
        return self.element_type == "TUPLE"

    @property
    def is_token(self) -> bool:
        return self.element_type == "TOKEN"

    @property
    def is_array(self) -> bool:
        return self.element_type not in NON_ARRAY_TYPES

    @property
    def rank(self) -> int:
        return len(self.dimensions)

    @property
    def dtype(self) -> np.dtype:
        """NumPy dtype of the elements; KeyError for tuples and tokens."""
        return numpy_dtype(self.element_type)

    @property
    def num_elements(self) -> int:
        return math.prod(self.dimensions)

    @property
    def nbytes(self) -> int:
        """Bytes of a dense array of this shape (sub-byte types packed), or the sum over a tuple."""
        if self.is_tuple:
            return sum(s.nbytes for s in self.tuple_shapes)
        if not self.is_array:
            return 0
        return (self.num_elements * bit_width(self.element_type) + 7) // 8

    def leaves(self) -> list[Shape]:
        """The array shapes of a (nested) tuple in order, or [self] for an array."""
        if not self.is_tuple:
            return [self]
        return [leaf for s in self.tuple_shapes for leaf in s.leaves()]

    @classmethod
    def array(cls, element_type: str, dimensions: tuple[int, ...] | list[int]) -> Shape:
        """An array shape with XLA's default (descending) layout."""
        dims = tuple(int(d) for d in dimensions)
        return cls(element_type, dims, Layout(tuple(range(len(dims) - 1, -1, -1))), (), (False,) * len(dims))

    @classmethod
    def tuple_of(cls, shapes: list[Shape] | tuple[Shape, ...]) -> Shape:
        return cls("TUPLE", tuple_shapes=tuple(shapes))

    # -- proto conversion ---------------------------------------------------------------------
    @classmethod
    def from_proto(cls, p: xd.ShapeProto) -> Shape:
        return cls(
            element_type=xd.PrimitiveType.Name(p.element_type),
            dimensions=tuple(p.dimensions),
            layout=Layout.from_proto(p.layout) if p.HasField("layout") else None,
            tuple_shapes=tuple(cls.from_proto(s) for s in p.tuple_shapes),
            is_dynamic_dimension=tuple(p.is_dynamic_dimension),
        )

    def to_proto(self, out: xd.ShapeProto | None = None) -> xd.ShapeProto:
        p = xd.ShapeProto() if out is None else out
        p.element_type = xd.PrimitiveType.Value(self.element_type)
        p.dimensions.extend(self.dimensions)
        if self.layout is not None:
            p.layout.CopyFrom(self.layout.to_proto())
        for s in self.tuple_shapes:
            s.to_proto(p.tuple_shapes.add())
        p.is_dynamic_dimension.extend(self.is_dynamic_dimension)
        return p

    def __str__(self) -> str:
        """HLO text's spelling, e.g. `f32[2,3]{1,0}` (one printer: hlo.text.shapes)."""
        from hlo.text.shapes import print_shape

        return print_shape(self.to_proto())
