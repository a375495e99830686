"""``Tile``: the tensor object a kernel sees (kernel arguments, allocations, results of ops).

A tile is a view: a traced tensor plus an affine map from the tile's coordinates to the tensor's.
Indexing makes a new view (no instruction); reading or writing through it emits instructions
that carry the composed ``Access``. Python operators (``+``, ``[...] =``, ``.astype``...) are
installed by ``nki.language``, which implements them (as JAX installs its Tracer's operators),
so that this module needs nothing above it.
"""

from __future__ import annotations

import numpy as np

from emulator import machine
from emulator.kernel_ir import Access, Affine, TensorDecl
from emulator.kernel_ir import divmod as dm
from emulator.kernel_ir import dtypes as ir_dtypes

from . import dtypes as nkd
from .errors import NonAffineIndexError
from .dynamic_index import DynamicIndex
from .indexing import Idx
from .views import compose, identity_index, reshape_exprs, subscript


class Tile:
    """A tensor as a kernel sees it (``nki.tensor``): an argument, an allocation or an
    instruction's result, viewed through an index.

    ``cast`` is set on bit-cast views of HBM tensors (``hbm_tensor.view(dtype)``): the elements
    read as ``cast`` but the IR tensor keeps its dtype; ``nl.load``/``nl.store`` reinterpret the
    bits on chip (see lang/memory.py), every other use of such a view is a trace error.
    ``vshape`` is set when the view's element width differs from the tensor's: the viewed
    tensor's shape (the last dimension scaled, as NumPy's ``.view``); ``index`` then maps into
    the viewed tensor, and ``raw_access`` translates it to the IR tensor."""

    __slots__ = ("trace", "decl", "shape", "index", "cast", "vshape", "indirect")
    __array_priority__ = 1000

    def __init__(self, trace, decl: TensorDecl, shape: tuple[int, ...] | None = None,
                 index: tuple[Affine, ...] | None = None, cast: str | None = None,
                 vshape: tuple[int, ...] | None = None):
        self.trace = trace
        self.decl = decl
        self.shape = tuple(decl.shape) if shape is None else tuple(shape)
        self.index = identity_index(self.shape) if index is None else index
        self.cast = cast
        self.vshape = vshape
        #: ``(tensor dimension, offsets tile)`` of an indirectly indexed HBM view
        #: (``a[idx_tile, i_f]``): only ``nl.load`` / ``nl.store`` / ``nl.atomic_rmw`` use it.
        self.indirect: tuple[int, "Tile"] | None = None

    # --- properties ----------------------------------------------------------------------------

    @property
    def dtype(self):
        return nkd.numpy_dtype(self.dtype_name)

    @property
    def dtype_name(self) -> str:
        return self.cast or self.decl.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def itemsize(self) -> int:
        return ir_dtypes.itemsize(self.dtype_name)

    @property
    def buffer(self) -> str:
        return self.decl.memory

    @property
    def name(self) -> str:
        return self.decl.name

    @property
    def on_chip(self) -> bool:
        return self.decl.memory in machine.ON_CHIP

    @property
    def tensor_shape(self) -> tuple[int, ...]:
        """The shape of the tensor this view indexes: the IR tensor's, or a width-changing
        bit-cast view's."""
        return tuple(self.decl.shape) if self.vshape is None else self.vshape

    def access(self) -> Access:
        if self.vshape is not None:
            self.bitcast_use("this operation")
        if self.indirect is not None:
            self.indirect_use("this operation")
        return Access(self.decl.name, self.shape, self.index)

    def base_access(self) -> Access:
        """The affine part of an indirect view's access (its offsets tile adds the rest)."""
        return Access(self.decl.name, self.shape, self.index)

    def indirect_use(self, what: str) -> None:
        """Refuse a use of an indirectly indexed view other than a load or store."""
        if self.indirect is not None:
            raise self.trace.error(
                "indirect view",
                f"{what}: the view of {self.decl.name!r} indexed by tile "
                f"{self.indirect[1].decl.name!r} can only be read with nl.load or written with "
                "nl.store / nl.atomic_rmw (indirect DMA); index it fully in one subscript")

    def raw_access(self, what: str) -> Access:
        """The access of the IR tensor's own elements behind this (bit-cast) view. Same width:
        the view's access. A wider view dtype (``r`` tensor elements per view element): a
        trailing tile axis of ``r`` elements. A narrower one: the tile's last axis must cover
        whole tensor elements (step 1 along the last dimension, a multiple of ``r`` view
        elements from a multiple of ``r``), and it then counts tensor elements."""
        if self.vshape is None:
            return Access(self.decl.name, self.shape, self.index)
        own, view = ir_dtypes.itemsize(self.decl.dtype), ir_dtypes.itemsize(self.cast)
        last = self.index[-1]
        k = len(self.shape)
        if view > own:
            r = view // own
            expr = Affine.make(last.const * r, {**{s: c * r for s, c in last.terms},
                                                f"t{k}": 1})
            return Access(self.decl.name, self.shape + (r,), self.index[:-1] + (expr,))
        r = own // view
        tk = f"t{k - 1}"
        rest = {s: c for s, c in last.terms if s != tk}
        uses = [s for a in self.index for s, _ in a.terms if dm.base_of(s) == tk and s != tk]
        uses += [s for a in self.index[:-1] for s, _ in a.terms if s == tk]
        if (k == 0 or last.coef(tk) != 1 or self.shape[-1] % r or last.const % r or uses
                or any(c % r for c in rest.values())):
            raise self.trace.error(
                "bit-cast view access",
                f"{what} through the {self.cast} view of {self.decl.name!r} "
                f"({self.decl.dtype}{list(self.decl.shape)}): a {self.decl.dtype} element holds "
                f"{r} {self.cast} elements, so the tile's last axis must run over whole ones: step "
                f"1 along the last dimension, a multiple of {r} elements starting at a multiple "
                f"of {r}; got index {last} for a tile of {list(self.shape)}")
        expr = Affine.make(last.const // r, {**{s: c // r for s, c in rest.items()}, tk: 1})
        return Access(self.decl.name, self.shape[:-1] + (self.shape[-1] // r,),
                      self.index[:-1] + (expr,))

    def __repr__(self) -> str:
        cast = f" viewed as {self.cast}" if self.cast else ""
        return (f"Tile({self.decl.name}: {self.decl.memory} {self.decl.dtype}{list(self.shape)}"
                f"{cast})")

    # --- views ---------------------------------------------------------------------------------

    def __getitem__(self, key) -> "Tile":
        self.indirect_use("indexing")
        entries = list(key) if isinstance(key, tuple) else [key]
        if not self.on_chip:  # an HBM index is data (indirect DMA): its values
            entries = [e.materialise() if isinstance(e, DynamicIndex) else e for e in entries]
        tiles = [(i, e) for i, e in enumerate(entries) if isinstance(e, (Tile, DynamicIndex))]
        offsets = None
        if tiles:
            if any(e is Ellipsis for e in entries):
                i = entries.index(Ellipsis)
                entries[i:i + 1] = [slice(None)] * (self.ndim - (len(entries) - 1))
                tiles = [(i, e) for i, e in enumerate(entries)
                         if isinstance(e, (Tile, DynamicIndex))]
            offsets = _indirect_entry(self, entries, tiles)
            key = tuple(entries)
        try:
            shape, exprs = subscript(self.shape, key)
        except (NonAffineIndexError, IndexError) as e:
            raise self.trace.error("invalid index", f"{self.decl.name}[...]: {e}") from None
        out = Tile(self.trace, self.decl, shape, compose(self.index, exprs), self.cast,
                   self.vshape)
        if offsets is not None:
            out.indirect = _indirect_dim(self, *offsets)
            if not self.on_chip:  # on chip: one dynamic offset for every element
                _check_indirect_partition(out)
        return out

    def reshape(self, *shape) -> "Tile":
        """The same elements, row-major, with another shape (no data moves): dimensions may be
        merged (``[P, 4, 6] -> [P, 24]``) or split (``[P, 24] -> [P, 2, 12]``), one size may be
        -1. On-chip tiles keep their partition dimension (``shape[0] == self.shape[0]``); an
        HBM tensor may regroup any dimensions, as NumPy's reshape of a contiguous array."""
        self.indirect_use("reshape")
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        new = _infer_shape(self, tuple(int(s) for s in shape))
        if self.on_chip and (not new or new[0] != self.shape[0]):
            raise self.trace.error(
                "reshape of the partition dimension",
                f"{self.decl.memory} tile {list(self.shape)} -> {list(new)}: an on-chip tile "
                f"keeps its partition dimension ({self.shape[0] if self.shape else 0}); only "
                "free dimensions are merged or split")
        try:
            exprs = reshape_exprs(self.shape, new)
            index = compose(self.index, exprs, {f"t{m}": n for m, n in enumerate(new)})
        except (NonAffineIndexError, ValueError) as e:
            raise self.trace.error("invalid reshape",
                                   f"{list(self.shape)} -> {list(new)}: {e}") from None
        return Tile(self.trace, self.decl, new, index, self.cast, self.vshape)

    def reshape_dim(self, dim: int, shape) -> "Tile":
        """Split dimension ``dim`` into ``shape`` (one size may be -1)."""
        dim = int(dim) % max(self.ndim, 1)
        return self.reshape(self.shape[:dim] + tuple(shape) + self.shape[dim + 1:])

    def flatten_dims(self, start_dim: int, end_dim: int) -> "Tile":
        """Merge dimensions ``start_dim`` .. ``end_dim`` (inclusive) into one."""
        a, b = int(start_dim) % max(self.ndim, 1), int(end_dim) % max(self.ndim, 1)
        merged = int(np.prod(self.shape[a:b + 1]))
        return self.reshape(self.shape[:a] + (merged,) + self.shape[b + 1:])

    def view(self, dtype) -> "Tile":
        """The same bits as another dtype, NumPy's ``.view`` on the last dimension (little
        endian, as the hardware): another width scales the last dimension, whose bytes must then
        divide. An on-chip tile: a bit-cast copy (which reads the same as a reinterpreting view
        since tiles are values). An HBM tensor: a view that ``nl.load`` and ``nl.store``
        reinterpret on chip; the IR keeps one tensor of one dtype, so nothing else may use it,
        and a view of another width is taken of a whole tensor (index the view)."""
        self.indirect_use("view")
        new = nkd.name_of(dtype)
        old_size, new_size = ir_dtypes.itemsize(self.dtype_name), ir_dtypes.itemsize(new)
        shape = self.shape if self.on_chip else self.tensor_shape
        if old_size != new_size:
            nbytes = shape[-1] * old_size if shape else 0
            if not shape or nbytes % new_size:
                raise self.trace.error(
                    "invalid view",
                    f"{self.decl.name!r} ({self.dtype_name}{list(shape)}) viewed as {new}: a "
                    f"bit-cast view of another width reinterprets the last dimension, whose "
                    f"{shape[-1] if shape else 0} x {old_size} = {nbytes} bytes must be a "
                    f"multiple of {new}'s {new_size} bytes")
            shape = shape[:-1] + (nbytes // new_size,)
        if self.on_chip:
            return self.trace.new("tensor_copy", shape, new, self, memory=self.decl.memory,
                                  bitcast=True)
        if old_size == new_size:
            return Tile(self.trace, self.decl, self.shape, self.index,
                        None if new == self.decl.dtype and self.vshape is None else new,
                        self.vshape)
        if self.index != identity_index(self.shape) or self.shape != self.tensor_shape:
            raise self.trace.error(
                "invalid view",
                f"a view of {self.decl.name!r} as {new} changes the element width, so it is "
                "taken of the whole tensor: view first, then index the view")
        if new == self.decl.dtype and shape == tuple(self.decl.shape):
            return Tile(self.trace, self.decl)
        return Tile(self.trace, self.decl, shape, None, new, shape)

    def bitcast_use(self, what: str) -> None:
        """Refuse a use of a bit-cast HBM view other than ``nl.load`` / ``nl.store``."""
        if self.cast:
            raise self.trace.error(
                "bit-cast view of an HBM tensor",
                f"{what}: a bit-cast view of HBM tensor {self.decl.name!r} ({self.decl.dtype} "
                f"viewed as {self.cast}) can only be read with nl.load or written with nl.store")

    def __bool__(self) -> bool:
        """An HBM tensor is a handle (a kernel argument or an allocation), true like any Python
        object, so that ``t = nl.load(x) if x else None`` tests whether an optional tensor
        argument was given (AWS's examples do). The values of an on-chip tile are only known when
        the kernel runs: branching on them is refused."""
        if self.buffer in (machine.HBM, machine.SHARED_HBM):
            return True
        raise self.trace.error("data-dependent control flow",
                               "a tile's values are only known when the kernel runs")

    def __iter__(self):
        raise self.trace.error("unsupported", "tiles can not be iterated; index them instead")

    __hash__ = object.__hash__  # tiles are identities (and ``==`` builds a comparison tile)


def _infer_shape(t: Tile, shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` with its one ``-1`` inferred; the element count must not change."""
    total = int(np.prod(t.shape))
    if shape.count(-1) > 1 or any(s < -1 for s in shape):
        raise t.trace.error("invalid reshape", f"{list(t.shape)} -> {list(shape)}: at most one "
                            "size may be -1, the others must be >= 0")
    if -1 in shape:
        rest = int(np.prod([s for s in shape if s != -1]))
        if rest == 0 or total % rest:
            raise t.trace.error("invalid reshape", f"{list(t.shape)} -> {list(shape)}: -1 can "
                                "not be inferred")
        shape = tuple(total // rest if s == -1 else s for s in shape)
    if int(np.prod(shape)) != total:
        raise t.trace.error("invalid reshape", f"{list(t.shape)} -> {list(shape)}: "
                            f"{total} elements can not become {int(np.prod(shape))}")
    return shape


def _indirect_entry(t: Tile, entries: list, tiles: list) -> tuple[int, Tile]:
    """Check an indirect subscript (``a[idx_tile, i_f]``: an on-chip integer tile of one index
    per partition, on one dimension of an HBM tensor) and replace the tile by a placeholder
    index of its shape (values 0: the offsets are added when the DMA runs). Returns the
    subscript position and the offsets tile."""
    tr = t.trace
    if len(tiles) > 1:
        raise tr.error("indirect index", f"{t.decl.name}[...]: only one dimension may be "
                       f"indexed by a tile, got {len(tiles)}")
    pos, idx = tiles[0]
    if not isinstance(idx, Tile):  # on chip, ``expr + offset`` (lang/dynamic.py)
        if t.cast:
            t.bitcast_use("a dynamic offset in its subscript")
        entries[pos] = idx.expr
        return pos, idx.offset
    scalar = t.on_chip and int(np.prod(idx.shape)) == 1
    if t.on_chip and not scalar:
        raise tr.error("indirect index of an on-chip tile",
                       f"{t.decl.name}[{idx.decl.name}, ...]: the values of a tile may index "
                       "an HBM tensor in nl.load / nl.store (indirect DMA), not an SBUF/PSUM "
                       "tile, except by one value (a dynamic offset: nisa.tensor_copy_dynamic_src"
                       "/dst) (err_copy_dynamic_indirect_indices_not_natively_supported)")
    if t.cast:
        t.bitcast_use("an index tile in its subscript (indirect DMA)")
    if not idx.on_chip:
        raise tr.error("indirect index", f"index tile {idx.decl.name!r} is in {idx.buffer}; "
                       "indices have to be in SBUF (nl.load them first)")
    if idx.indirect is not None or idx.cast:
        raise tr.error("indirect index", f"index tile {idx.decl.name!r} is itself a view that "
                       "only nl.load / nl.store may use")
    if nkd.name_of(idx.dtype_name) not in _INDEX_DTYPES:
        raise tr.error("indirect index dtype", f"index tile {idx.decl.name!r} is "
                       f"{idx.dtype_name}; indices are integers ({', '.join(_INDEX_DTYPES)})")
    if not scalar and (not idx.shape or int(np.prod(idx.shape[1:])) != 1):
        raise tr.error("indirect index on a free dimension",
                       f"index tile {idx.decl.name!r} {list(idx.shape)}: indirect DMA takes one "
                       "index per partition, a [P, 1] (or [P]) tile "
                       "(err_indirect_indices_free_dim)")
    others = [e for e in entries if isinstance(e, Idx) and e.ndim > 0]
    rank = max([2] + [e.ndim for e in others]) if others or len(entries) > 1 else 1
    placeholder_shape = (1 if scalar else idx.shape[0],) + (1,) * (rank - 1)
    entries[pos] = Idx(placeholder_shape, 0, {})
    return pos, idx


#: Dtypes an indirect DMA's index tile may hold.
_INDEX_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def _indirect_dim(t: Tile, pos: int, idx: Tile) -> tuple[int, Tile]:
    """The tensor dimension that subscript position ``pos`` of view ``t`` addresses: the view
    axis must map to one tensor dimension with stride 1 (so that an index value counts that
    dimension's elements)."""
    # Ellipsis expands before ``pos`` is reached only when it comes first; positions after one
    # are counted from the end.
    sym = f"t{pos}"
    dims = [d for d, a in enumerate(t.index) if a.coef(sym)]
    if len(dims) != 1 or t.index[dims[0]].coef(sym) != 1 or any(
            dm.base_of(s) == sym and s != sym for a in t.index for s, _ in a.terms):
        raise t.trace.error("indirect index", f"{t.decl.name}[...]: axis {pos} of this view is "
                            "not one dimension of the tensor; index the tensor itself")
    return dims[0], idx


def _check_indirect_partition(view: Tile) -> None:
    """The index values vary along the tile's partition axis; they must address the dimension
    that axis walks or a block dimension before it, not a free one after it."""
    dim, idx = view.indirect
    if any(a.coef("t0") or any(dm.base_of(s) == "t0" for s, _ in a.terms)
           for d, a in enumerate(view.index) if d < dim):
        raise view.trace.error(
            "indirect index on a free dimension",
            f"{view.decl.name}[...] indexed by tile {idx.decl.name!r}: the tile's partitions "
            f"already walk another dimension of the tensor; indirect DMA indexes the partition "
            "(or block) dimension (err_indirect_indices_free_dim)")
