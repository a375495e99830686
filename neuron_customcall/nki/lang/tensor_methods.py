"""Methods of beta 2's ``NkiTensor`` and beta 1's ``nki.tensor`` that a tile lacked: views that
rename, drop or broadcast axes (``permute``, ``squeeze_dim``, ``expand_dim``, ``broadcast``),
``slice``/``select`` (subscripts by axis), ``size``, ``assert_shape``, ``is_indirect``, ``ap``
(``access_pattern.py``: raw patterns that map to per-dimension affine indices); and, refused by
name, the rest of the access-pattern API (``vector_select``, ``rearrange``, ``strides``,
``offset``, ``get_pattern``, ``is_contiguous``), which addresses storage by raw strides the
emulator's per-dimension affine accesses do not model. ``language.py`` installs them on Tile.
"""

from __future__ import annotations

import math
from typing import Callable

from emulator.kernel_ir import Affine
from emulator.kernel_ir import divmod as dm

from ..tile import Tile
from ..unsupported import refuse
from ..registers import VirtualRegister
from . import dynamic
from .access_pattern import ap
from .memory import expand_dims


def _view(t: Tile, shape: tuple[int, ...], rename: dict[str, str | None], what: str) -> Tile:
    """``t`` with tile-axis symbols renamed (``None``: an extent-1 axis that goes, read at 0)."""
    t.indirect_use(what)
    index = []
    for a in t.index:
        terms: dict[str, int] = {}
        for s, c in a.terms:
            base = dm.base_of(s)
            if base not in rename:
                terms[s] = terms.get(s, 0) + c
            elif rename[base] is None:
                if base != s:  # a // or % of an axis that is always 0: fold it
                    raise t.trace.error("invalid view", f"{what}: axis {base} is divided in "
                                        f"{t.decl.name!r}'s index {a}")
            else:
                new = rename[base] if base == s else dm.rebase(s, rename[base])
                terms[new] = terms.get(new, 0) + c
        index.append(Affine.make(a.const, terms))
    return Tile(t.trace, t.decl, shape, tuple(index), t.cast, t.vshape)


def _axis(t: Tile, dim: int, what: str, extra: int = 0) -> int:
    n = t.ndim + extra
    if not isinstance(dim, int) or not -n <= dim < n:
        raise t.trace.error("invalid axis", f"{what}: axis {dim!r} of a rank-{t.ndim} tile")
    return dim % n


def permute(self: Tile, dims) -> Tile:
    """The axes in the order ``dims`` (a view); on chip the partition axis stays first."""
    dims = tuple(_axis(self, d, "permute") for d in dims)
    if sorted(dims) != list(range(self.ndim)):
        raise self.trace.error("invalid axis", f"permute({list(dims)}) of a rank-{self.ndim} tile")
    if self.on_chip and dims[0] != 0:
        raise self.trace.error("permute of the partition dimension",
                               f"permute({list(dims)}) moves the partition axis of on-chip "
                               f"{self.decl.name!r} (use a transpose)")
    return _view(self, tuple(self.shape[d] for d in dims),
                 {f"t{d}": f"t{i}" for i, d in enumerate(dims)}, "permute")


def squeeze_dim(self: Tile, dim: int) -> Tile:
    """Drop an axis of size 1 (a view)."""
    dim = _axis(self, dim, "squeeze_dim")
    if self.shape[dim] != 1:
        raise self.trace.error("invalid axis", f"squeeze_dim({dim}) of an axis of size "
                               f"{self.shape[dim]}")
    rename = {f"t{j}": (None if j == dim else f"t{j - (j > dim)}") for j in range(self.ndim)}
    return _view(self, self.shape[:dim] + self.shape[dim + 1:], rename, "squeeze_dim")


def expand_dim(self: Tile, dim: int) -> Tile:
    """A new axis of size 1 at ``dim`` (beta 2's name of ``expand_dims``)."""
    return expand_dims(self, _axis(self, dim, "expand_dim", extra=1))


def broadcast(self: Tile, dim: int, size: int) -> Tile:
    """An axis of size 1 repeated ``size`` times (a view: every position reads the same
    element)."""
    dim = _axis(self, dim, "broadcast")
    if self.shape[dim] != 1 or int(size) < 1:
        raise self.trace.error("invalid axis", f"broadcast({dim}, {size}) of an axis of size "
                               f"{self.shape[dim]} (only size 1 broadcasts)")
    view = _view(self, self.shape, {f"t{dim}": None}, "broadcast")
    return Tile(view.trace, view.decl, self.shape[:dim] + (int(size),) + self.shape[dim + 1:],
                view.index, view.cast, view.vshape)


def slice_(self: Tile, dim: int, start: int = 0, end: int | None = None, step: int = 1) -> Tile:
    """``self[..., start:end:step, ...]`` along ``dim``."""
    dim = _axis(self, dim, "slice")
    return self[(slice(None),) * dim + (slice(start, end, step),)]


def select(self: Tile, dim: int, index) -> Tile:
    """``self[..., index, ...]`` along ``dim`` (the axis goes). ``index`` may be a run-time value
    (a VirtualRegister or a one-element integer tile): a view at a dynamic offset
    (lang/dynamic.py), read or written by ``nisa.dma_copy`` / ``nisa.tensor_copy``."""
    dim = _axis(self, dim, "select")
    if not isinstance(index, (Tile, VirtualRegister)) or (
            isinstance(index, Tile) and math.prod(index.shape) != 1):
        return self[(slice(None),) * dim + (index,)]  # an int, or an index tile per partition
    api = "NkiTensor.select"
    self.indirect_use(api)
    if self.on_chip and dim == 0:
        raise self.trace.error("dynamic select", f"{api}: the partition dimension of an on-chip "
                               "tile can not be selected at run time")
    off = dynamic.offset_tile(self.trace, index, api)
    tensor_dim = dynamic.tensor_dim(self, dim, api)
    return dynamic.at_offset(self[(slice(None),) * dim + (0,)], tensor_dim, off)


def vector_select(self: Tile, dim: int, offsets) -> Tile:
    """Partition ``p`` of the result is ``self``'s row ``offsets[p]`` (a gather of rows of an HBM
    tensor, as ``self[offsets, ...]`` indexes it): ``dim`` is 0."""
    api = "NkiTensor.vector_select"
    if _axis(self, dim, "vector_select") != 0 or self.on_chip:
        raise self.trace.error("vector_select", f"{api}: selects along dimension 0 of an HBM "
                               f"tensor, got dimension {dim} of a {self.buffer} tensor")
    if not isinstance(offsets, Tile):
        raise self.trace.error("vector_select", f"{api}: offsets is a [P, 1] integer tile in "
                               f"SBUF, got {type(offsets).__name__}")
    return self[(offsets,) + (slice(None),) * (self.ndim - 1)]


def assert_shape(self: Tile, shape) -> Tile:
    """Beta 1's ``tensor.assert_shape``: a trace error unless the shape is ``shape``."""
    if tuple(int(s) for s in shape) != tuple(self.shape):
        raise self.trace.error("assert_shape", f"{self.decl.name!r} has shape {list(self.shape)}, "
                               f"not {list(shape)}")
    return self


def size(self: Tile) -> int:
    return math.prod(self.shape)


def is_indirect(self: Tile) -> bool:
    return self.indirect is not None


_ACCESS_PATTERNS = ("raw strides and offsets address storage directly; the emulator's accesses "
                    "are per-dimension affine indices (use subscripts, reshape, permute)")


def _refused(name: str) -> Callable:
    def method(self: Tile, *_args, **_kwargs):
        refuse(f"NkiTensor.{name}", _ACCESS_PATTERNS)
    method.__name__ = name
    return method


#: name -> what Tile gets (a function becomes a method, a property stays one).
METHODS: dict[str, object] = {
    "permute": permute, "squeeze_dim": squeeze_dim, "expand_dim": expand_dim,
    "broadcast": broadcast, "slice": slice_, "select": select, "assert_shape": assert_shape,
    "size": property(size), "is_indirect": is_indirect,
    "ap": ap,
    "vector_select": vector_select,
    **{n: _refused(n) for n in ("rearrange", "get_pattern", "is_contiguous")},
    **{n: property(_refused(n)) for n in ("strides", "offset")},
}
