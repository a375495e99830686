"""The emulator's run-time error, in a module of its own so that op handlers can raise it without
importing the executor (which imports every handler: emulator.executor -> emulator.ops)."""
from __future__ import annotations


class EmulatorError(RuntimeError):
    """A failure while running a program (bad inputs, or an instruction that could not execute)."""
