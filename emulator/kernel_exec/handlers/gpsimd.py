"""GpSimd instructions: ``iota`` (index arithmetic as values), ``affine_select`` (a predicate
computed on the fly from the element's position) and the cross-partition reduction."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from emulator import machine
from emulator.kernel_ir import Instruction, affine_from_json
from emulator.kernel_ir.instructions import GPSIMD

from .. import alu
from ..access import eval_affine, eval_mask
from .registry import EngineHandlers

if TYPE_CHECKING:  # the runner imports this table
    from ..runner import Runner

HANDLERS = EngineHandlers(GPSIMD)


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
