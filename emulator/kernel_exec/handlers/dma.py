"""DMA: ``load`` (HBM -> on chip) and ``store`` (on chip or a constant -> HBM), and the copy with
dtype conversion, bit-casting and broadcasting that they share with VectorE's ``tensor_copy``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from emulator.kernel_ir import Access, Instruction, dtypes
from emulator.kernel_ir.instructions import DMA

from .. import device_print as printing
from ..collective import run_collective, run_rank_id
from ..indirect import gather, is_indirect, scatter, writes_indirect
from ..lnc import run_sendrecv
from .registry import EngineHandlers

if TYPE_CHECKING:  # the runner imports this table
    from ..runner import Runner

HANDLERS = EngineHandlers(DMA)
HANDLERS.register("collective")(run_collective)  # nki.collectives: kernel_exec/collective.py
HANDLERS.register("rank_id")(run_rank_id)
HANDLERS.register("sendrecv")(run_sendrecv)  # LNC=2: kernel_exec/lnc.py


@HANDLERS.register("load")
@HANDLERS.register("store")
def copy(r: Runner, ins: Instruction) -> None:
    """load / store / tensor_copy: element-wise copy with dtype conversion and broadcasting. The
    result may alias the source's memory (zero-copy loads of read-only inputs); ``write`` copies
    when the source can still change. Indirect loads and stores (an index tile's values in the
    HBM address) gather and scatter (``kernel_exec/indirect.py``), and so do on-chip copies
    with a dynamic offset (``nisa.tensor_copy_dynamic_src/dst``, ``.ap(scalar_offset=)``)."""
    if is_indirect(ins):
        (scatter if writes_indirect(ins) else gather)(r, ins)
        return
    src = ins.srcs[0]
    alias = isinstance(src, Access) and not r.is_immutable(src.tensor)
    if ins.attrs.get("bitcast"):
        # Reinterpret the bits, NumPy's .view on the last axis: another width regroups it
        # (the tile's bytes are the same, row-major, so the shape follows).
        value = r.read(src, src.shape)
        lead = value.shape[:value.ndim - len(src.shape)]
        value = np.ascontiguousarray(value).view(
            dtypes.to_numpy(r.kernel.tensors[ins.dst.tensor].dtype)).reshape(
                lead + tuple(ins.dst.shape))
    else:
        value = r.read(src, ins.dst.shape, masked=True)
    r.write(ins, value, may_alias=alias)


@HANDLERS.register("device_print")
def device_print(r: Runner, ins: Instruction) -> None:
    """``nl.device_print``: one line per program and iteration in the batch, naming its program
    ids and loop variables (``p0=1 l2=3``; Python-looped ones are bound, batched ones come from
    the batch axes), in batch order. The destination is a one-element token."""
    ctx = r.ctx
    src = ins.srcs[0]
    value = r.read(src)
    value = np.broadcast_to(value, ctx.batch_shape + value.shape[value.ndim - len(src.shape):])
    nb = len(ctx.batch_syms)
    bound = " ".join(f"{s}={v}" for s, v in sorted(ctx.bound.items()))
    lines = []
    for pos in np.ndindex(*value.shape[:nb]):
        syms = " ".join(f"{s}={ctx.offsets.get(s, 0) + i}" for s, i in zip(ctx.batch_syms, pos))
        where = " ".join(x for x in (bound, syms) if x)
        lines.append(printing.format_line(ins.attrs["prefix"], f" [{where}]" if where else "",
                                          value[pos]))
    printing.write_lines(lines)
    r.write(ins, np.zeros((1,) * len(ins.dst.shape), dtype=np.uint8))
@HANDLERS.register("dma_copy")
def dma_copy(r: Runner, ins: Instruction) -> None:
    """``nki.isa.dma_copy``: the source's elements in row-major order into the destination
    (equal element counts; the shapes may differ), converted to the destination's dtype."""
    src = ins.srcs[0]
    value = r.read(src, src.shape)
    lead = value.shape[:value.ndim - len(src.shape)]
    if tuple(src.shape) != tuple(ins.dst.shape):
        value = np.reshape(value, lead + tuple(ins.dst.shape))
    alias = isinstance(src, Access) and not r.is_immutable(src.tensor)
    r.write(ins, value, may_alias=alias)
