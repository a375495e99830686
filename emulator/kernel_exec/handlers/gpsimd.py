"""GpSimd instructions: ``iota`` (index arithmetic as values), ``affine_select`` (a predicate
computed on the fly from the element's position), the cross-partition reduction, and the
data-dependent ones: gathers within a partition (``gather_flattened``) or a group of 16
(``local_gather``), ``sequence_bounds``, ``nonzero_with_count`` and ``topk``.""" 

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from emulator import machine
from emulator.kernel_ir import Instruction, affine_from_json
from emulator.kernel_ir.instructions import GPSIMD

from .. import alu
from ..access import eval_affine, eval_mask
from ..lnc import run_core_barrier
from .registry import EngineHandlers

if TYPE_CHECKING:  # the runner imports this table
    from ..runner import Runner

HANDLERS = EngineHandlers(GPSIMD)
HANDLERS.register("core_barrier")(run_core_barrier)  # LNC=2: kernel_exec/lnc.py


@HANDLERS.register("iota")
def iota(r: Runner, ins: Instruction) -> None:
    """Materialise the affine expression ``attrs['expr']`` over the tile (and program ids/loop
    variables) as values: index arithmetic used as data."""
    expr = affine_from_json(ins.attrs["expr"])
    r.write(ins, eval_affine(expr, r.ctx, ins.dst.shape))


@HANDLERS.register("affine_select")
def affine_select(r: Runner, ins: Instruction) -> None:
    """``on_true`` where every affine predicate in ``attrs['pred']`` is >= 0, else the scalar
    ``on_false`` (a causal mask without materialising indices)."""
    tile = ins.dst.shape
    pred = eval_mask(tuple(affine_from_json(p) for p in ins.attrs["pred"]), r.ctx, tile)
    x = alu.widen(r.read(ins.srcs[0], tile, masked=True))
    r.write(ins, np.where(pred, x, np.asarray(ins.srcs[1].value, dtype=x.dtype)))


@HANDLERS.register("partition_reduce")
def partition_reduce(r: Runner, ins: Instruction) -> None:
    """Reduce across the partition axis ([P, F] -> [1, F])."""
    x = alu.widen(r.read(ins.srcs[0]))
    nb = len(r.ctx.batch_shape)
    r.write(ins, alu.reduce(ins.attrs["op"], x, axis=nb, keepdims=True))


@HANDLERS.register("gather_flattened")
def gather_flattened(r: Runner, ins: Instruction) -> None:
    """Per partition, ``np.take_along_axis`` over the flattened free dimensions; indices past
    the end read ``machine.uninitialised_value`` (NaN for floats) instead of hardware garbage."""
    ctx = r.ctx
    data_src, idx_src = ins.srcs
    data = np.broadcast_to(r.read(data_src), ctx.batch_shape + tuple(data_src.shape))
    idx = np.broadcast_to(r.read(idx_src), ctx.batch_shape + tuple(idx_src.shape))
    p = data_src.shape[0]
    flat = data.reshape(ctx.batch_shape + (p, -1))
    where = idx.reshape(ctx.batch_shape + (p, -1)).astype(np.int64)
    inside = where < flat.shape[-1]
    got = np.take_along_axis(flat, np.where(inside, where, 0), axis=-1)
    if not inside.all():
        got = np.where(inside, got, machine.uninitialised_value(flat.dtype))
    r.write(ins, got.reshape(ctx.batch_shape + tuple(ins.dst.shape)))


def _rows(x: np.ndarray, op) -> np.ndarray:
    """An operand's value with its free axes flattened: batch axes, partitions, elements."""
    lead = x.ndim - len(op.shape) + 1
    return x.reshape(x.shape[:lead] + (-1,))


def _checked_indices(r: Runner, idx: np.ndarray, size: int, what: str) -> np.ndarray:
    idx = idx.astype(np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= size):
        raise r.error("gather index out of range",
                      f"{what} indices must lie in [0, {size}); got {idx.min()}..{idx.max()}")
    return idx


@HANDLERS.register("local_gather")
def local_gather(r: Runner, ins: Instruction) -> None:
    """``local_gather``: each group of 16 partitions reads its ``index`` slice partition-major
    (column by column), keeps the first ``valid`` indices, and every partition of the group takes
    ``elems`` contiguous elements of its own flattened row from each."""
    src, index = ins.srcs
    ne, nv = int(ins.attrs["elems"]), int(ins.attrs["valid"])
    x = _rows(r.read(src), src)
    idx = _rows(r.read(index), index)
    shape = np.broadcast_shapes(x.shape[:-2], idx.shape[:-2])
    p = x.shape[-2]
    x = np.broadcast_to(x, shape + x.shape[-2:]).reshape(shape + (p // 16, 16, x.shape[-1]))
    idx = np.broadcast_to(idx, shape + idx.shape[-2:]).reshape(shape + (p // 16, 16, -1))
    flat = np.swapaxes(idx, -1, -2).reshape(shape + (p // 16, -1))[..., :nv]
    offsets = flat[..., None].astype(np.int64) + np.arange(ne)
    offsets = _checked_indices(r, offsets.reshape(shape + (p // 16, 1, nv * ne)), x.shape[-1],
                               "local_gather")
    out = np.take_along_axis(x, np.broadcast_to(offsets, shape + (p // 16, 16, nv * ne)), axis=-1)
    r.write(ins, out.reshape(shape + tuple(ins.dst.shape)))


@HANDLERS.register("sequence_bounds")
def sequence_bounds(r: Runner, ins: Instruction) -> None:
    """Per element, the start and exclusive end of its run of equal non-zero ids; padding (id 0)
    gets (n, -1): [P, n] -> [P, 2, n]."""
    src = ins.srcs[0]
    ids = _rows(r.read(src), src)
    n = ids.shape[-1]
    pos = np.arange(n)
    first = np.ones(ids.shape, dtype=bool)
    first[..., 1:] = ids[..., 1:] != ids[..., :-1]
    last = np.ones(ids.shape, dtype=bool)
    last[..., :-1] = ids[..., :-1] != ids[..., 1:]
    start = np.maximum.accumulate(np.where(first, pos, 0), axis=-1)
    end = np.flip(np.minimum.accumulate(np.flip(np.where(last, pos + 1, n), -1), axis=-1), -1)
    pad = ids == 0
    r.write(ins, np.stack([np.where(pad, n, start), np.where(pad, -1, end)], axis=-2))


@HANDLERS.register("nonzero_with_count")
def nonzero_with_count(r: Runner, ins: Instruction) -> None:
    """On partitions 0, 16, ..., 112 of the tile (one per GpSimd core): the positions (+``offset``)
    of the non-zero elements in order, ``padding``, then their count. The other partitions keep
    what ``dst`` held."""
    src = ins.srcs[0]
    x = _rows(r.read(src), src)
    n = x.shape[-1]
    nz = x != 0
    count = nz.sum(axis=-1)
    order = np.argsort(~nz, axis=-1, kind="stable")
    slots = np.arange(n) < count[..., None]
    vals = np.where(slots, order + int(ins.attrs.get("offset", 0)),
                    int(ins.attrs.get("padding", -1)))
    new = np.concatenate([vals, count[..., None]], axis=-1)
    old = _rows(r.read(ins.dst), ins.dst)
    new, old = np.broadcast_arrays(new, old)
    core = (np.arange(x.shape[-2]) % 16 == 0)[:, None]
    out = np.where(core, new, old)
    r.write(ins, out.reshape(out.shape[:-2] + tuple(ins.dst.shape)))


#: Partitions of one ``topk`` snake.
SNAKE = 16


@HANDLERS.register("topk")
def topk(r: Runner, ins: Instruction) -> None:
    """The K largest of each 16-partition snake's first ``n`` elements (element ``e`` at
    partition ``e % 16``, column ``e // 16``), compared in fp32: selected by value, the lower
    index first among equal values (NaN ranks below every number), then written ascending by
    value (the lower index first among equal values) with their indices, to every partition of
    the group: [P, X] -> [P, 2, K]."""
    src = ins.srcs[0]
    x = alu.widen(r.read(src)).astype(np.float32)
    lead = x.shape[:x.ndim - 2]
    parts, cols = x.shape[-2:]
    n, k = int(ins.attrs["n"]), int(ins.dst.shape[-1])
    groups = parts // SNAKE
    snake = np.swapaxes(x.reshape(lead + (groups, SNAKE, cols)), -1, -2)
    vals = snake.reshape(lead + (groups, SNAKE * cols))[..., :n]
    idx = np.broadcast_to(np.arange(n), vals.shape)
    ranked = np.where(np.isnan(vals), np.inf, -vals)
    chosen = np.lexsort((idx, ranked), axis=-1)[..., :k]
    top = np.take_along_axis(vals, chosen, axis=-1)
    up = np.lexsort((chosen, np.where(np.isnan(top), -np.inf, top)), axis=-1)
    top = np.take_along_axis(top, up, axis=-1)
    chosen = np.take_along_axis(chosen, up, axis=-1)
    out = np.stack([top, chosen.astype(np.float32)], axis=-2)  # [..., groups, 2, K]
    out = np.broadcast_to(out[..., None, :, :], lead + (groups, SNAKE, 2, k))
    r.write(ins, out.reshape(lead + (parts, 2, k)))
