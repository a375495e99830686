"""ScalarE: ``activation(func, data, bias, scale)`` computes ``func(data * scale + bias)`` in fp32."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from emulator.kernel_ir import Access, Const, Instruction
from emulator.kernel_ir.instructions import SCALAR

from .. import alu
from .registry import EngineHandlers

if TYPE_CHECKING:  # the runner imports this table
    from ..runner import Runner

HANDLERS = EngineHandlers(SCALAR)


@HANDLERS.register("activation")
def activation(r: Runner, ins: Instruction) -> None:
    tile = ins.dst.shape
    src = ins.srcs[0]
    x = alu.widen(r.read(src, tile, masked=True))
    scale = ins.attrs.get("scale", 1.0)
    if len(ins.srcs) > 2:  # srcs: data, bias, and a per-partition [P, 1] scale tile
        x = alu.binary("multiply", x, r.read(ins.srcs[2], tile, masked=True))
    elif scale != 1.0:
        x = alu.binary("multiply", x, scale)
    bias = ins.srcs[1] if len(ins.srcs) > 1 else Const(0.0)
    if not (isinstance(bias, Const) and bias.value == 0):
        x = alu.binary("add", x, r.read(bias, tile, masked=True))
    out = None
    if ins.attrs["func"] != "copy":
        out = r.out_view(np.float32)
        if out is None and x is not None and len(ins.srcs) <= 2:
            out = r.scratch(src, tile)
        if out is None:
            out = r.fresh(tile)
    y = alu.activation(ins.attrs["func"], x, out)
    # "copy" of an unscaled operand is the operand itself: let write() copy if it can change.
    alias = y is x and isinstance(src, Access) and not r.is_immutable(src.tensor)
    r.write(ins, y, may_alias=alias)
