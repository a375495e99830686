"""GpSimd instructions: ``iota`` (index arithmetic as values), ``affine_select`` (a predicate
computed on the fly from the element's position) and the cross-partition reduction."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

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
