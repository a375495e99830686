"""``nl.device_print``: print a tile's values while the kernel runs on the emulator.

It traces to one ``device_print`` instruction (emulator/kernel_ir/instructions.py) that reads the
tile (SBUF, PSUM or HBM) and writes one line per program and iteration, ``<prefix> [p0=1] [...]``,
to the emulator's debug stream (stdout unless ``emulator.kernel_exec.device_print.set_stream``
chose another), as the SDK's CPU simulator prints immediately to stdout.
"""

from __future__ import annotations

from ..signatures import keyword_aliases
from ..tile import Tile
from ..tracer import current
from .operands import operand


@keyword_aliases(print_prefix="prefix", tensor="x")
def device_print(prefix, x, *, mask=None) -> None:
    """Print ``prefix`` followed by the values of ``x`` (beta 1: ``(prefix, x)``; beta 2:
    ``(print_prefix, tensor)``)."""
    tr = current()
    if not isinstance(prefix, str):
        raise tr.error("device_print prefix", f"the prefix must be a constant string, got "
                       f"{type(prefix).__name__}")
    if mask is not None:
        raise tr.error("device_print mask", "a masked device_print is not supported: print a "
                       "slice of the tile instead")
    x = operand(x)
    if not isinstance(x, Tile):
        raise tr.error("device_print operand", f"device_print prints a tile or tensor, not "
                       f"{type(x).__name__}")
    tr.new("device_print", (1, 1), "uint8", x, prefix=prefix)
