"""``expr + offset``: an affine index expression plus a one-element integer tile whose value is
known only when the kernel runs, as beta 1's examples index a buffer at a dynamic offset
(``src[ix, iy + offsets[0, k]]``, lang/dynamic.py builds them).

In a subscript of an on-chip tile the expression indexes the dimension and the offset is added
when the instruction runs (tile.py); anywhere else the value is the tile ``iota(expr) + offset``
that ``Idx + tile`` always computed. Building that tile needs the language's operand layer,
which sits above this module: it registers the builder (``set_materialiser``) when it is
imported, so that this module imports nothing that imports it.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .indexing import Idx

_materialiser: Callable[["DynamicIndex"], Any] | None = None


def set_materialiser(build: Callable[["DynamicIndex"], Any]) -> None:
    """Register how a DynamicIndex becomes a tile (lang/operands.py does, on import)."""
    global _materialiser
    _materialiser = build


class DynamicIndex:
    """``expr + offset``. ``+``/``-`` of ints and index expressions stay dynamic indices (the
    offset keeps its sign); any other operation works on the materialised tile."""

    __slots__ = ("expr", "offset")
    __array_priority__ = 1001  # above Idx's, so that NumPy scalars and Idx defer to us

    def __init__(self, expr: Idx, offset: Any):
        self.expr = expr
        self.offset = offset

    @property
    def shape(self) -> tuple[int, ...]:
        return self.expr.shape

    def materialise(self):
        """The value as data: the tile ``iota(expr) + offset``."""
        assert _materialiser is not None, "neuron_customcall.nki.lang.operands registers it"
        return _materialiser(self)

    def _shift(self, other, sign: int):
        if isinstance(other, (Idx, int, np.integer)) and not isinstance(other, bool):
            return DynamicIndex(self.expr + sign * other, self.offset)
        return None

    def __add__(self, other):
        out = self._shift(other, 1)
        return self.materialise() + other if out is None else out

    __radd__ = __add__

    def __sub__(self, other):
        out = self._shift(other, -1)
        return self.materialise() - other if out is None else out

    def __rsub__(self, other):
        return other - self.materialise()

    def __getattr__(self, name: str):
        """Any other tile member (``nl.add(iy, off).reshape(...)``, ``.dtype``) is the
        materialised tile's: the result of ``nl.add`` stays usable as the tile it was."""
        if name.startswith("__") or name in DynamicIndex.__slots__:
            raise AttributeError(name)
        return getattr(self.materialise(), name)

    def __repr__(self) -> str:
        return f"DynamicIndex({self.expr!r} + {self.offset!r})"


def _materialised(name: str):
    def method(self, *args):
        return getattr(self.materialise(), name)(*args)
    method.__name__ = name
    return method


for _name in ("__mul__", "__rmul__", "__truediv__", "__rtruediv__", "__floordiv__", "__mod__",
              "__neg__", "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__",
              "__and__", "__or__", "__xor__", "__lshift__", "__rshift__"):
    setattr(DynamicIndex, _name, _materialised(_name))
DynamicIndex.__hash__ = None  # __eq__ builds a tile

__all__ = ["DynamicIndex", "set_materialiser"]
