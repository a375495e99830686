"""Indirect DMA: loads and stores whose HBM index along one dimension comes from an integer tile
(NKI's ``nl.load(a[idx_tile, i_f])`` / ``nl.store(a[idx_tile, i_f], value=...)``), and on-chip
copies at a dynamic offset (``tensor_copy`` with ``indirect``: one register value, broadcast).

The instruction's HBM access gives the affine part of every index; its dimension
``attrs["indirect"]`` also adds, at each tile position, the value of the ``offsets`` tile there
(read like any operand, so a ``[P, 1]`` or ``[P]`` tile of row numbers applies to a whole
partition). The addresses are data, so these are gathers and scatters with index arrays, never
strided views; an index outside the tensor (inside the mask) is an ``OutOfBoundsAccessError``
naming the offending value, as the hardware's DMA refuses it, unless ``attrs["oob_skip"]``
(``oob_mode.skip``): then those positions are neither read nor written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from emulator.kernel_ir import Access, Const, Instruction

from . import alu
from .access import eval_mask
from .errors import OutOfBoundsAccessError

if TYPE_CHECKING:
    from .runner import Runner


def is_indirect(ins: Instruction) -> bool:
    return "indirect" in ins.attrs


def writes_indirect(ins: Instruction) -> bool:
    """The offsets address the destination (a scatter: ``store``, or a ``tensor_copy`` with
    ``indirect_dst``), not the source (a gather)."""
    return ins.op == "store" or bool(ins.attrs.get("indirect_dst"))


def _indices(r: Runner, ins: Instruction, hbm: Access) -> tuple[list[np.ndarray], np.ndarray,
                                                                 tuple[int, ...]]:
    """Per storage axis of ``hbm``'s tensor, the index array over ``batch + tile`` with the
    offsets added; the mask (all true without one); the storage shape."""
    if len(ins.srcs) < 2 or not isinstance(ins.srcs[1], Access):
        raise r.error("indirect access", f"{ins.op} with attrs['indirect'] needs an offsets tile")
    tile = tuple(hbm.shape)
    st = r._storage(hbm.tensor)
    plan = r._plan(st, hbm, tile)
    dim = int(ins.attrs["indirect"])
    if not 0 <= dim < len(hbm.index):
        raise r.error("indirect access", f"indirect dimension {dim} of a rank-{len(hbm.index)} "
                      f"tensor {hbm.tensor!r}")
    offsets = np.asarray(r.read(ins.srcs[1], tile, masked=True))
    if offsets.dtype.kind not in "iub":
        raise r.error("indirect index dtype",
                      f"offsets tile {ins.srcs[1].tensor!r} holds {offsets.dtype}, not integers")
    idx = [np.asarray(ix, dtype=np.int64) for ix in plan.index_arrays()]
    axis = len(st.batch) + dim
    idx[axis] = np.broadcast_to(idx[axis] + offsets.astype(np.int64), plan.out_shape)
    if ins.mask:
        mask = np.broadcast_to(eval_mask(ins.mask, r.ctx, tile), plan.out_shape)
    else:
        mask = np.ones(plan.out_shape, dtype=bool)
    shape = st.array.shape
    skip = bool(ins.attrs.get("oob_skip"))
    for a, (ix, n) in enumerate(zip(idx, shape)):
        bad = mask & ((ix < 0) | (ix >= n))
        if skip:
            mask = mask & ~bad
            continue
        if bad.any():
            decl = r.kernel.tensors[hbm.tensor]
            vals = np.unique(ix[bad])
            shown = ", ".join(str(v) for v in vals[:8]) + (", ..." if len(vals) > 8 else "")
            raise OutOfBoundsAccessError(
                r.kernel.name, ins.loc,
                f"indirect {ins.op} {'writes' if writes_indirect(ins) else 'reads'} {decl.memory} "
                f"tensor {hbm.tensor!r} {list(decl.shape)} out of bounds: index "
                f"{shown} along dimension {a - len(st.batch)} (extent {n})")
    return idx, mask, shape


def gather(r: Runner, ins: Instruction) -> None:
    """An indirect ``load``: HBM elements at data-dependent rows into the destination tile."""
    src = ins.srcs[0]
    idx, mask, shape = _indices(r, ins, src)
    clipped = tuple(np.clip(ix, 0, n - 1) for ix, n in zip(idx, shape))
    value = r._storage(src.tensor).array[clipped]
    if ins.attrs.get("oob_skip") and not mask.all():
        # Skipped positions are not read: the destination keeps what it held (NaN if nothing).
        dst = ins.dst
        before = (r.read(dst, tuple(dst.shape)) if dst.tensor in r.storage
                  else np.full(mask.shape, np.nan))
        value = np.where(mask, value, before)
    r.write(ins, value)


#: ``dst = acc(dst, value)`` applied one contribution at a time (``ufunc.at`` folds repeated
#: targets in order, as sequential atomic read-modify-writes would).
_ACC_AT = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
           "maximum": np.maximum, "minimum": np.minimum}


def scatter(r: Runner, ins: Instruction) -> None:
    """An indirect ``store`` (or ``atomic_rmw``): the value's elements to data-dependent rows.
    Programs and iterations write in batch order, so where two of them name the same element
    the last one's value lands (what sequential execution leaves); an accumulation applies
    every contribution in that order."""
    dst = ins.dst
    value_op = ins.srcs[0]
    idx, mask, shape = _indices(r, ins, dst)
    st = r._storage(dst.tensor)
    if not r.exclusive(st):
        st.array = np.array(st.array)
        st.owned = True
    arr = st.array
    value = (np.asarray(value_op.value) if isinstance(value_op, Const)
             else r.read(value_op, tuple(dst.shape), masked=True))
    flat = np.ravel_multi_index(tuple(ix[mask] for ix in idx), shape)
    vals = np.broadcast_to(value, mask.shape)[mask]
    if ins.acc is not None:
        targets, inverse = np.unique(flat, return_inverse=True)
        where = np.unravel_index(targets, shape)
        current = np.array(alu.widen(arr[where]))
        _ACC_AT[ins.acc].at(current, inverse, alu.widen(vals).astype(current.dtype, copy=False))
        arr[where] = current.astype(arr.dtype)
        return
    # the last contribution to each element wins: unique over the reversed order
    targets, first_in_reversed = np.unique(flat[::-1], return_index=True)
    last = flat.size - 1 - first_in_reversed
    arr[np.unravel_index(targets, shape)] = np.asarray(vals)[last].astype(arr.dtype, copy=False)
