"""DMA: ``load`` (HBM -> on chip) and ``store`` (on chip or a constant -> HBM), and the copy with
dtype conversion, bit-casting and broadcasting that they share with VectorE's ``tensor_copy``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from emulator.kernel_ir import Access, Instruction, dtypes
from emulator.kernel_ir.instructions import DMA

from ..indirect import gather, is_indirect, scatter
from .registry import EngineHandlers

if TYPE_CHECKING:  # the runner imports this table
    from ..runner import Runner

HANDLERS = EngineHandlers(DMA)


@HANDLERS.register("load")
@HANDLERS.register("store")
def copy(r: Runner, ins: Instruction) -> None:
    """load / store / tensor_copy: element-wise copy with dtype conversion and broadcasting. The
    result may alias the source's memory (zero-copy loads of read-only inputs); ``write`` copies
    when the source can still change. Indirect loads and stores (an index tile's values in the
    HBM address) gather and scatter (``kernel_exec/indirect.py``)."""
    if is_indirect(ins):
        (gather if ins.op == "load" else scatter)(r, ins)
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
