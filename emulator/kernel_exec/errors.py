"""Run-time errors of the kernel executor. Each names the kernel, the source line and the rule."""

from __future__ import annotations

from emulator.kernel_ir import SourceLoc
from emulator.kernel_ir.errors import KernelError


class KernelRuntimeError(KernelError, RuntimeError):
    """A kernel failed while running on the emulator."""


class OutOfBoundsAccessError(KernelRuntimeError, IndexError):
    """An unmasked access reaches outside its tensor. Also an ``IndexError``: what the SDK's
    simulator raises for it (NumPy's indexing error), so code that catches that catches this."""

    def __init__(self, kernel: str, loc: SourceLoc | None, detail: str):
        super().__init__(kernel, loc, "out-of-bounds access", detail)


class UnboundSymbolError(KeyError):
    """An index symbol with no value in the running context (the runner turns it into a
    ``KernelRuntimeError`` naming the instruction)."""
