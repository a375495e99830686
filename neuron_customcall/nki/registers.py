"""Virtual registers (``nisa.register_alloc``) and the data-dependent loops they drive.

A register is an int32 [1, 1] on-chip tensor: its value is data, known only when the kernel
runs, so it moves like a tile (``register_move/load/store`` are copies) and it can steer the
kernel only through the kernel IR's data-dependent loops (emulator/kernel_ir/control.py):
``nl.dynamic_range``/``nl.fori_loop`` with register bounds, ``nl.while_loop`` and the
reference's ``while reg:``. Their bodies are traced once; the executor runs them once per
iteration. State carried between iterations lives in tiles written in place (the reference:
"carry any other loop state through SBUF/HBM").

``while reg:`` works through ``VirtualRegister.__bool__``: the first call opens a ``while``
loop on ``reg`` and answers True, so Python traces the body once; the next call, with that loop
the innermost open one, closes it and answers False. Any other use of a register as a condition
(``if reg:``, ``not reg``, a ``break`` out of ``while reg:``) leaves the loop open and is the
trace error "data-dependent control flow" when the kernel ends.
"""

from __future__ import annotations

from emulator import machine
from emulator.kernel_ir import WHILE_LOOP

from .tile import Tile
from .tracer import current


class VirtualRegister:
    """An engine register (``nisa.register_alloc``): an int32 [1, 1] on-chip tensor."""

    def __init__(self, t: Tile):
        self.tile = t

    def __bool__(self) -> bool:
        tr = current()
        node = tr.innermost_loop()
        if node is not None and id(node) in tr.condition_loops and \
                tr.condition_loops[id(node)] is self:
            del tr.condition_loops[id(node)]
            tr.close_loop(node)
            return False
        node = tr.open_loop(WHILE_LOOP, (self.tile,))
        tr.condition_loops[id(node)] = self
        return True

    def __index__(self) -> int:
        raise current().error("data-dependent control flow", "a VirtualRegister's value is only "
                              "known when the kernel runs: it can not be a Python int (use it "
                              "as a loop bound of nl.dynamic_range/fori_loop or a "
                              "scalar_offset)")

    __int__ = __index__

    def __repr__(self) -> str:
        return f"VirtualRegister({self.tile.name})"


def new_register() -> VirtualRegister:
    """A fresh, uninitialised register."""
    tr = current()
    reg = VirtualRegister(Tile(tr, tr.declare((1, 1), "int32", machine.SBUF)))
    tr.emit("alloc", reg.tile)
    return reg


__all__ = ["VirtualRegister", "new_register"]
