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
from .views import compose, identity_index, subscript


class Tile:
    """``cast`` is set on bit-cast views of HBM tensors (``hbm_tensor.view(dtype)``): the elements
    read as ``cast`` but the IR tensor keeps its dtype; ``nl.load``/``nl.store`` reinterpret the
    bits on chip (see lang/memory.py), every other use of such a view is a trace error.
    ``vshape`` is set when the view's element width differs from the tensor's: the viewed
    tensor's shape (the last dimension scaled, as NumPy's ``.view``); ``index`` then maps into
    the viewed tensor, and ``raw_access`` translates it to the IR tensor."""

    __slots__ = ("trace", "decl", "shape", "index", "cast", "vshape")
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
        return Access(self.decl.name, self.shape, self.index)

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
        try:
            shape, exprs = subscript(self.shape, key)
        except (NonAffineIndexError, IndexError) as e:
            raise self.trace.error("invalid index", f"{self.decl.name}[...]: {e}") from None
        return Tile(self.trace, self.decl, shape, compose(self.index, exprs), self.cast,
                    self.vshape)

    def reshape(self, shape) -> "Tile":
        """A new view with ``shape`` over the same elements of a whole tensor, where dimensions are
        only split (or size-1 dimensions added/removed): those stay affine."""
        shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        if int(np.prod(shape)) != int(np.prod(self.shape)):
            raise self.trace.error("invalid reshape", f"{list(self.shape)} -> {list(shape)}")
        if self.index != identity_index(self.shape) or self.shape != self.tensor_shape:
            raise self.trace.error("invalid reshape", "only a whole tensor can be reshaped")
        return _reshape_view(self, shape)

    def view(self, dtype) -> "Tile":
        """The same bits as another dtype, NumPy's ``.view`` on the last dimension (little
        endian, as the hardware): another width scales the last dimension, whose bytes must then
        divide. An on-chip tile: a bit-cast copy (which reads the same as a reinterpreting view
        since tiles are values). An HBM tensor: a view that ``nl.load`` and ``nl.store``
        reinterpret on chip; the IR keeps one tensor of one dtype, so nothing else may use it,
        and a view of another width is taken of a whole tensor (index the view)."""
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
        raise self.trace.error("data-dependent control flow",
                               "a tile's values are only known when the kernel runs")

    def __iter__(self):
        raise self.trace.error("unsupported", "tiles can not be iterated; index them instead")

    __hash__ = object.__hash__  # tiles are identities (and ``==`` builds a comparison tile)


def _reshape_view(t: Tile, shape: tuple[int, ...]) -> Tile:
    """Reshape a whole-tensor view by merging/splitting trailing dimensions: new coordinates map
    to old ones affinely only when each old dimension is a product of consecutive new ones (or
    the other way round); other reshapes are rejected."""
    old = list(t.tensor_shape)
    new = list(shape)
    exprs: list[dict[str, int]] = []
    i = j = 0
    while i < len(old) or j < len(new):
        if i < len(old) and old[i] == 1 and (j >= len(new) or new[j] != 1):
            exprs.append({})
            i += 1
            continue
        if j < len(new) and new[j] == 1 and (i >= len(old) or old[i] != 1):
            j += 1
            continue
        if i >= len(old) or j >= len(new):
            break
        if old[i] == new[j]:
            exprs.append({f"t{j}": 1})
            i += 1
            j += 1
            continue
        # split old[i] into new[j..k]
        prod, k = 1, j
        while k < len(new) and prod < old[i]:
            prod *= new[k]
            k += 1
        if prod != old[i]:
            raise t.trace.error("invalid reshape",
                                f"{old} -> {new} does not split or keep dimensions")
        terms = {}
        stride = 1
        for m in range(k - 1, j - 1, -1):
            terms[f"t{m}"] = stride
            stride *= new[m]
        exprs.append(terms)
        i += 1
        j = k
    if len(exprs) != len(old):
        raise t.trace.error("invalid reshape", f"{old} -> {new} is not supported")
    index = tuple(Affine.make(0, e) for e in exprs)
    return Tile(t.trace, t.decl, shape, index, t.cast, t.vshape)
