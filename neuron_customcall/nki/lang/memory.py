"""Creating tensors and moving data: ndarray/zeros/..., load/store/copy, views, assignment."""

from __future__ import annotations

import numpy as np

from emulator import machine
from emulator.kernel_ir import CONSTANT, Affine, affine_to_json
from emulator.kernel_ir import divmod as dm
from emulator.kernel_ir import dtypes as ir_dtypes

from .. import dtypes as nkd
from ..dtypes import float32
from ..indexing import Idx, Pred
from ..tile import Tile
from ..views import compose
from ..tracer import current
from .elementwise import where
from .operands import (alu_op_name, as_shape, buffer_name, check_fits, operand, par_dim, sbuf,
                       scalar_value)
from ..compiler import allocation
from ..signatures import keyword_aliases
from . import rng
from .tensor_ops import transpose

# --- creation --------------------------------------------------------------------------------------

def new_tensor(shape, dtype: str, memory: str, name: str = "", init: str = "uninit") -> Tile:
    """Declare a tensor of ``shape`` and return the whole of it as a tile. On chip, dimensions
    before an ``nl.par_dim`` are *block* dimensions: ``(4, nl.par_dim(128), 512)`` is 4 tiles of
    [128, 512], declared partition-first as [128, 4, 512] (so the partition limit and the
    capacity see 128 partitions of 4 x 512 elements) and seen through a view in the kernel's
    order."""
    tr = current()
    dims = shape if isinstance(shape, (tuple, list)) else (shape,)
    k = next((j for j, s in enumerate(dims) if isinstance(s, par_dim)), 0)
    user = as_shape(shape)
    if k == 0 or memory not in machine.ON_CHIP:
        return Tile(tr, tr.declare(user, dtype, memory, name=name, init=init))
    decl = tr.declare((user[k],) + user[:k] + user[k + 1:], dtype, memory, name=name, init=init,
                      blocks=k)
    return Tile(tr, decl, user, _block_index(k, len(user)))


def _block_index(k: int, rank: int) -> tuple[Affine, ...]:
    """The view of a block tensor declared partition-first: tensor dimension 0 is view axis
    ``k`` (the ``par_dim``), dimensions 1..k the blocks before it, the rest the free axes."""
    order = (k,) + tuple(range(k)) + tuple(range(k + 1, rank))
    return tuple(Affine(0, ((f"t{j}", 1),)) for j in order)


def like_shape(a: Tile) -> tuple:
    """``a``'s shape, with ``nl.par_dim`` marking its partition axis when ``a`` is a whole
    block tensor (so that ``zeros_like`` keeps the blocks)."""
    k = a.trace.blocks.get(a.decl.name, 0)
    if k and len(a.shape) == len(a.decl.shape) and a.index == _block_index(k, len(a.shape)):
        return a.shape[:k] + (par_dim(a.shape[k]),) + a.shape[k + 1:]
    return a.shape


def ndarray(shape, dtype, buffer=None, name: str = "", address=None) -> Tile:
    """A new tensor; on chip (default SBUF) its contents start as NaN, as on the SDK simulator.
    ``address`` and ``nki.compiler`` allocators are checked, not modelled (compiler/allocation.py)."""
    tr = current()
    memory = buffer_name(buffer)
    t = new_tensor(shape, nkd.name_of(dtype), memory, name)
    allocation.place(tr, shape, as_shape(shape), t.dtype_name, memory, buffer, address)
    if memory in machine.ON_CHIP:
        tr.emit("alloc", t)
    return t


def full(shape, fill_value, dtype, buffer=None, name: str = "", *,
         lazy_initialization: bool = False) -> Tile:
    """A new tensor filled with ``fill_value``: on chip one ``alloc`` with a fill, in HBM an
    allocation and a store of the constant. ``lazy_initialization`` lets the compiler fill the
    tensor when it is first used instead of where it is allocated; every read sees the fill
    either way (on chip the emulator fills at the allocation, and a zero fill is deferred to
    the first use already), so it changes no value."""
    tr = current()
    if not isinstance(lazy_initialization, (bool, np.bool_)):
        raise tr.error("invalid argument", f"lazy_initialization must be True or False, got "
                       f"{lazy_initialization!r}")
    memory = buffer_name(buffer)
    if memory not in machine.ON_CHIP:
        t = ndarray(shape, dtype, buffer=buffer, name=name)
        tr.emit("store", t, scalar_value(fill_value))
        return t
    t = new_tensor(shape, nkd.name_of(dtype), memory, name)
    allocation.place(tr, shape, as_shape(shape), t.dtype_name, memory, buffer, None)
    tr.emit("alloc", t, fill=scalar_value(fill_value))
    return t


def zeros(shape, dtype, buffer=None, name: str = "", *,
          lazy_initialization: bool = False) -> Tile:
    return full(shape, 0, dtype, buffer=buffer, name=name,
                lazy_initialization=lazy_initialization)


def ones(shape, dtype, buffer=None, name: str = "", *, lazy_initialization: bool = False) -> Tile:
    return full(shape, 1, dtype, buffer=buffer, name=name,
                lazy_initialization=lazy_initialization)


@keyword_aliases(x="a")
def zeros_like(a: Tile, dtype=None, buffer=None, name: str = "") -> Tile:
    return zeros(like_shape(a), dtype if dtype is not None else a.dtype_name,
                 buffer=buffer if buffer is not None else sbuf, name=name)


@keyword_aliases(x="a")
def empty_like(a: Tile, dtype=None, buffer=None, name: str = "") -> Tile:
    return ndarray(like_shape(a), dtype if dtype is not None else a.dtype_name,
                   buffer=buffer if buffer is not None else sbuf, name=name)


def rand(shape, dtype=float32, buffer=None, name: str = "") -> Tile:
    """Uniform [0, 1) values (reproducible on the emulator: seeded per instruction)."""
    tr = current()
    t = new_tensor(shape, nkd.name_of(dtype), buffer_name(buffer), name, init="defined")
    srcs, attrs = rng.draw()
    tr.emit("random", t, *srcs, **attrs)
    return t


def dropout(x, rate, dtype=None, *, mask=None) -> Tile:
    """Zero each element with probability ``rate`` (no rescaling, as NKI's dropout)."""
    x = operand(x)
    keep = rand(x.shape) >= float(rate)
    return where(keep, x, 0.0, dtype=dtype, mask=mask)


def shared_constant(constant, dtype=None, *, name: str = "") -> Tile:
    """A shared-HBM tensor holding ``constant`` (array-like); its bytes travel inside the IR."""
    tr = current()
    arr = np.asarray(constant)
    dt = nkd.name_of(dtype if dtype is not None else arr.dtype)
    arr = np.ascontiguousarray(arr.astype(ir_dtypes.to_numpy(dt)))
    decl = tr.declare(arr.shape, dt, machine.SHARED_HBM, name=name or "const", role=CONSTANT)
    tr.constants[decl.name] = arr.tobytes()
    return Tile(tr, decl)


def shared_identity_matrix(n: int, dtype=np.uint8, dst: Tile | None = None) -> Tile:
    """An n x n identity matrix (uint8 unless ``dtype`` says otherwise, as both generations'
    references default) in shared HBM: ``nl.load`` it for a tile. Beta 2's ``dst`` receives the
    identity (loaded into an on-chip ``dst``, stored into an HBM one) and is returned."""
    ident = shared_constant(np.eye(int(n)), dtype)
    if dst is None:
        return ident
    if dst.on_chip:
        assign(dst, load(ident, dtype=dst.dtype_name))
    else:
        store(dst, load(ident))
    return dst


# --- memory ----------------------------------------------------------------------------------------

def load(src: Tile, dtype=None, *, mask=None) -> Tile:
    """HBM -> SBUF. Masked-out elements are neither read nor written (they stay NaN). From a
    bit-cast HBM view: the load brings the stored bits, a bit-cast copy on chip reinterprets."""
    tr = current()
    want = nkd.name_of(dtype) if dtype is not None else src.dtype_name
    if src.indirect is not None:
        dim, offsets = src.indirect
        return tr.new("load", src.shape, want, src.base_access(), offsets, mask=mask,
                      indirect=dim)
    if src.cast:
        access = src.raw_access("nl.load")
        raw = tr.new("load", access.shape, src.decl.dtype, access,
                     mask=_view_mask(src, mask, "nl.load"))
        cast = tr.new("tensor_copy", src.shape, src.cast, raw, bitcast=True)
        return cast if want == src.cast else copy(cast, dtype=want)
    return tr.new("load", src.shape, want, src, mask=mask)


def store(dst: Tile, value, *, mask=None) -> None:
    """SBUF/PSUM -> HBM. Into a bit-cast HBM view: the value is converted to the view's dtype
    and its bits reinterpreted as the tensor's own dtype on chip before the store."""
    v = operand(value)
    tr = current()
    if dst.cast:
        access = dst.raw_access("nl.store")
        mask = _view_mask(dst, mask, "nl.store")
        if dst.vshape is None:
            if not isinstance(v, Tile):
                v = full((1,), v, dst.cast)
            elif v.dtype_name != dst.cast:
                v = copy(v, dtype=dst.cast)
        elif not isinstance(v, Tile):
            v = full(dst.shape, v, dst.cast)
        elif v.dtype_name != dst.cast or v.shape != dst.shape:
            # Another width regroups the last axis: the value must be the whole tile first.
            check_fits(tr, v.shape, dst.shape, "nl.store")
            v = copy(broadcast_to(v, dst.shape) if v.shape != dst.shape else v, dtype=dst.cast)
        raw = tr.new("tensor_copy", v.shape if dst.vshape is None else access.shape,
                     dst.decl.dtype, v, bitcast=True)
        tr.emit("store", access, raw, mask=mask)
        return
    _emit_store(dst, v, mask, None, "nl.store")


def _emit_store(dst: Tile, v, mask, acc: str | None, what: str) -> None:
    """A store into an HBM view, indirect (``dst[idx_tile, i_f]``) or not."""
    tr = current()
    if isinstance(v, Tile):
        check_fits(tr, v.shape, dst.shape, what)
    if dst.indirect is not None:
        dim, offsets = dst.indirect
        tr.emit("store", dst.base_access(), v, offsets, mask=mask, acc=acc, indirect=dim)
        return
    tr.emit("store", dst, v, mask=mask, acc=acc)


def _view_mask(view: Tile, mask, what: str):
    """A mask over a width-changing view's tile as affine predicates over the raw tile of
    ``view.raw_access``: the same axes, except that a narrower view's last axis counts whole
    tensor elements there, so a mask may not depend on it."""
    if mask is None or view.vshape is None:
        return mask
    tr = current()
    if not isinstance(mask, Pred):
        raise tr.error("invalid mask", f"mask must be an affine predicate, got {mask!r}")
    affs = mask.to_affines(len(view.shape))
    last = f"t{len(view.shape) - 1}"
    if ir_dtypes.itemsize(view.cast) < ir_dtypes.itemsize(view.decl.dtype) and any(
            dm.base_of(s) == last for a in affs for s, _ in a.terms):
        raise tr.error("bit-cast view access",
                       f"{what} through the {view.cast} view of {view.decl.name!r}: a mask may "
                       f"not depend on the tile's last axis, whose elements share "
                       f"{view.decl.dtype} elements")
    return affs


def load_transpose2d(src: Tile, dtype=None, *, mask=None) -> Tile:
    """HBM [K, M] -> SBUF [M, K], transposed by the DMA: one load through the transposed view,
    so the source may be taller than 128 rows (only the result's partition dimension M is
    limited). ``mask`` is over the source's [K, M] positions, as for ``nl.load`` of ``src``."""
    tr = current()
    src.indirect_use("nl.load_transpose2d")
    if src.ndim != 2:
        raise tr.error("transpose shape", f"load_transpose2d needs a 2-D source, got "
                       f"{list(src.shape)}")
    if src.cast:
        return transpose(load(src, mask=mask, dtype=dtype))
    view = Tile(tr, src.decl, (src.shape[1], src.shape[0]),
                compose(src.index, [Affine(0, (("t1", 1),)), Affine(0, (("t0", 1),))]))
    if mask is not None:
        if not isinstance(mask, Pred):
            raise tr.error("invalid mask", f"mask must be an affine predicate, got {mask!r}")
        mask = tuple(_swap_tile_axes(a) for a in mask.to_affines(2))
    return load(view, mask=mask, dtype=dtype)


def _swap_tile_axes(a: Affine) -> Affine:
    """``a`` with tile axes 0 and 1 exchanged (also inside ``//`` and ``%`` symbols)."""
    swap = {"t0": "t1", "t1": "t0"}
    terms = {}
    for sym, c in a.terms:
        base = dm.base_of(sym)
        new = swap.get(sym, sym) if base == sym else dm.rebase(sym, swap.get(base, base))
        terms[new] = terms.get(new, 0) + c
    return Affine.make(a.const, terms)


@keyword_aliases(src="x")
def copy(x, dtype=None, *, mask=None) -> Tile:
    """On-chip copy, converting to ``dtype``."""
    x = operand(x)
    return current().new("tensor_copy", x.shape,
                         nkd.name_of(dtype) if dtype is not None else x.dtype_name, x, mask=mask)


copy._nki_act = "copy"


@keyword_aliases(src="x")
def broadcast_to(x, shape, dtype=None) -> Tile:
    """``x`` broadcast to ``shape`` (NumPy rules), converted to ``dtype`` if given."""
    x = operand(x)
    shape = as_shape(shape)
    tr = current()
    check_fits(tr, x.shape, shape, "broadcast_to")
    return tr.new("tensor_copy", shape, nkd.name_of(dtype) if dtype is not None else x.dtype_name,
                  x)


@keyword_aliases(data="x")
def expand_dims(x: Tile, axis: int) -> Tile:
    """A view with a new size-1 axis (no data movement)."""
    rank = x.ndim + 1
    axis = axis % rank
    shape = x.shape[:axis] + (1,) + x.shape[axis:]
    ren = {f"t{j}": f"t{j + 1 if j >= axis else j}" for j in range(x.ndim)}

    def renamed(sym: str) -> str:
        base = dm.base_of(sym)
        return ren.get(sym, sym) if base == sym else dm.rebase(sym, ren.get(base, base))

    index = tuple(Affine.make(a.const, {renamed(s): c for s, c in a.terms}) for a in x.index)
    return Tile(x.trace, x.decl, shape, index, x.cast, x.vshape)


def atomic_rmw(dst: Tile, value, op, *, mask=None) -> None:
    """``dst = op(dst, value)`` in HBM."""
    dst.bitcast_use("nl.atomic_rmw")
    _emit_store(dst, operand(value), mask, alu_op_name(op), "nl.atomic_rmw")


def assign(view: Tile, value) -> None:
    """``tile[...] = value``: the instruction depends on where the value and the view live."""
    tr = current()
    if isinstance(value, Tile) and value.decl is view.decl and value.access() == view.access():
        return  # ``t[...] += x``: Python re-assigns the view __iadd__ already updated in place
    if isinstance(value, Idx):
        tr.emit("iota", view, expr=affine_to_json(value.to_affine(view.ndim)))
        return
    v = operand(value)
    if isinstance(v, Tile) and (v.cast or v.indirect is not None):
        v = load(v)  # ``sbuf_tile[...] = hbm.view(dtype)[...]``: a load that reinterprets
    if not view.on_chip and (view.cast or view.indirect is not None or not isinstance(v, Tile)):
        store(view, v)
        return
    if not isinstance(v, Tile):
        tr.emit("memset", view, v)
        return
    check_fits(tr, v.shape, view.shape, "assignment")
    if not view.on_chip:
        tr.emit("store", view, v)
    elif not v.on_chip:
        tr.emit("load", view, v)
    else:
        tr.emit("tensor_copy", view, v)


def accumulate(dst: Tile, value, op: str) -> None:
    """``dst op= value`` in place (PSUM accumulation in ``affine_range`` loops)."""
    tr = current()
    v = operand(value)
    if not dst.on_chip:
        raise tr.error("in-place update of HBM", f"{dst.name} {op}= ...: use nl.store / atomic_rmw")
    if isinstance(v, Tile):
        check_fits(tr, v.shape, dst.shape, f"{dst.name} {op}= ...")
    tr.emit("tensor_copy", dst, v, acc=op)
