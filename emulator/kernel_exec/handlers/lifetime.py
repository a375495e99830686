"""Bookkeeping that no engine runs (engine ``none``): ``alloc`` starts a tensor's lifetime."""

from __future__ import annotations

from typing import TYPE_CHECKING

from emulator.kernel_ir import Instruction
from emulator.kernel_ir.instructions import NONE

from .registry import EngineHandlers

if TYPE_CHECKING:  # the runner imports this table
    from ..runner import Runner

HANDLERS = EngineHandlers(NONE)


@HANDLERS.register("alloc")
def alloc(r: Runner, ins: Instruction) -> None:
    """Start a tensor's lifetime: NaN (uninitialised) or ``attrs['fill']`` (``nl.zeros``...)."""
    r.allocate(ins.dst.tensor, ins.attrs.get("fill"))
