"""Views at a dynamic offset: a register value (or a one-element integer tile) added to one
dimension's index when the instruction runs.

Beta 1 writes them as a subscript of an on-chip tile by a one-element tile
(``src[ix, offsets[0, k], iz]``) read by ``nisa.tensor_copy_dynamic_src`` (or written by
``tensor_copy_dynamic_dst``); beta 2 as ``t.ap(pattern, scalar_offset=reg, indirect_dim=d)``,
whose element offset ``scalar_offset * prod(shape[d + 1:])`` is one step of dimension ``d``
(the access-pattern deep dive), read or written by ``nisa.tensor_copy`` and ``nisa.dma_copy``.
Either way the view is the tile's ``indirect`` pair ``(dimension, offset tile)``: the executor
adds the offset to that dimension of every element's index (kernel_exec/indirect.py) and an
index outside the tensor is an ``OutOfBoundsAccessError`` naming the value, never a wrap into
the next row or a clip. Any other use of such a view is the trace error ``indirect view``.

Beta 1's examples also compute the index: ``src[ix, iy + offsets[0, k]]`` (an index expression
plus the offset tile). ``Idx + offset`` is then a ``DynamicIndex``, the expression and the tile
kept apart: in a subscript of an on-chip tile the expression indexes the dimension and the
offset is added at run time, as for a bare offset; used anywhere else it is the tile
``iota(expr) + offset`` it always was (``nki/dynamic_index.py``).
"""

from __future__ import annotations

import math

from .. import dtypes as nkd
from ..dynamic_index import DynamicIndex
from ..indexing import Idx
from ..registers import VirtualRegister
from ..tile import Tile

#: Dtypes a dynamic offset may have.
OFFSET_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def offset_tile(trace, x, api: str) -> Tile:
    """The one-element on-chip integer tile holding a dynamic offset: a register's, or ``x``."""
    t = x.tile if isinstance(x, VirtualRegister) else x
    if not isinstance(t, Tile):
        raise trace.error("dynamic offset", f"{api}: a dynamic offset is a VirtualRegister or a "
                          f"one-element integer tile in SBUF, got {type(x).__name__}")
    if not t.on_chip or math.prod(t.shape) != 1 or t.indirect is not None or t.cast:
        raise trace.error("dynamic offset", f"{api}: a dynamic offset is one integer on chip "
                          f"(a register or a [1, 1] SBUF tile), got {t.buffer} "
                          f"{list(t.shape)}")
    if nkd.name_of(t.dtype_name) not in OFFSET_DTYPES:
        raise trace.error("dynamic offset dtype", f"{api}: the offset {t.decl.name!r} is "
                          f"{t.dtype_name}; offsets are integers")
    return t


def tensor_dim(view: Tile, axis: int, api: str) -> int:
    """The tensor dimension that axis ``axis`` of ``view`` walks, one element per step (so a
    run-time index along the axis counts that dimension's elements)."""
    sym = f"t{axis}"
    dims = [d for d, a in enumerate(view.index) if a.coef(sym)]
    if len(dims) != 1 or view.index[dims[0]].coef(sym) != 1 or any(
            s != sym and sym in s for a in view.index for s, _ in a.terms):
        raise view.trace.error("dynamic select", f"{api}: axis {axis} of this view of "
                               f"{view.decl.name!r} is not one dimension of the tensor; select "
                               "on the tensor itself")
    return dims[0]


def at_offset(view: Tile, dim: int, offset: Tile) -> Tile:
    """``view`` with ``offset``'s value added to the index of its tensor's dimension ``dim``."""
    out = Tile(view.trace, view.decl, view.shape, view.index, view.cast, view.vshape)
    out.indirect = (dim, offset)
    return out


def is_offset(x) -> bool:
    """Whether ``x`` can be a dynamic offset: one integer element on chip, a plain view."""
    return (isinstance(x, Tile) and x.on_chip and math.prod(x.shape) == 1
            and x.indirect is None and not x.cast
            and nkd.name_of(x.dtype_name) in OFFSET_DTYPES)


def plus_offset(x, y) -> DynamicIndex | None:
    """``x + y`` as a DynamicIndex when one is an index expression and the other a dynamic
    offset, else None."""
    if isinstance(x, Idx) and is_offset(y):
        return DynamicIndex(x, y)
    if isinstance(y, Idx) and is_offset(x):
        return DynamicIndex(y, x)
    return None


__all__ = ["offset_tile", "at_offset", "OFFSET_DTYPES", "DynamicIndex", "plus_offset",
           "is_offset"]
