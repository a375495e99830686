"""Where ``nl.device_print`` output goes: one text line per printing program and iteration.

The SDK's CPU simulator prints immediately to stdout, and so does the emulator by default; a
program that wants the lines elsewhere (a log file, a test) passes a text stream to
``set_stream`` (``None`` restores stdout, looked up at each write so that redirections of
``sys.stdout`` apply). Values are formatted by NumPy on one line under its current print
options, so ``numpy.set_printoptions(threshold=...)`` decides whether a large tile is shown in
full or summarised with ``...``.
"""

from __future__ import annotations

import sys
import threading
from typing import TextIO

import numpy as np

_lock = threading.Lock()
_stream: TextIO | None = None


def set_stream(stream: TextIO | None) -> TextIO | None:
    """Send device_print lines to ``stream`` (``None``: stdout); returns the previous one."""
    global _stream
    with _lock:
        previous, _stream = _stream, stream
    return previous


def format_line(prefix: str, where: str, values: np.ndarray) -> str:
    """``<prefix><where> <values>``: the tile as NumPy prints it, on one line."""
    text = np.array2string(np.asarray(values), separator=", ", max_line_width=sys.maxsize)
    return f"{prefix}{where} {text.replace(chr(10), '')}"


def write_lines(lines: list[str]) -> None:
    """Write whole lines at once (programs on several host threads never interleave mid-line)."""
    with _lock:
        out = _stream if _stream is not None else sys.stdout
        out.write("".join(line + "\n" for line in lines))
        out.flush()
