"""Progress display for long steps: compiling a graph or a C++ library, running a graph.

Why: building a custom-op library runs g++ for seconds per source, and compiling or running a
large graph takes seconds too; a silent terminal looks hung. On a terminal a step shows
"step ..." while it runs (with "k/n" as its parts finish) and its duration when it ends, on
standard error so that standard output stays clean for data. Elsewhere (pipes, notebooks, CI
logs) the same lines go to the log at INFO. Errors-only logging (the command line's `-q`, or
``logging.getLogger("neuron_customcall").setLevel(logging.ERROR)``) hides the display.
"""
from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

log = logging.getLogger("neuron_customcall.progress")


class Progress:
    """A running step: `advance` counts its parts as they finish (any thread)."""

    def __init__(self, what: str, total: int | None, out: TextIO, tty: bool) -> None:
        self.what, self.total, self._out, self._tty = what, total, out, tty
        self.done = 0
        self._lock = threading.Lock()

    def _line(self, detail: str = "") -> str:
        count = f" {self.done}/{self.total}" if self.total else ""
        return f"{self.what} ...{count}{f' ({detail})' if detail else ''}"

    def advance(self, detail: str = "") -> None:
        """One more part finished (``detail`` names it: a source file)."""
        with self._lock:
            self.done += 1
            if self._tty:
                self._out.write("\r\x1b[K" + self._line(detail))
                self._out.flush()
            else:
                log.debug("%s", self._line(detail))


def _on_terminal(out: TextIO) -> bool:
    try:
        tty = out.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False
    return tty and logging.getLogger("neuron_customcall").isEnabledFor(logging.WARNING)


@contextmanager
def task(what: str, total: int | None = None, stream: TextIO | None = None) -> Iterator[Progress]:
    """Shows ``what`` while the block runs (with k/``total`` as parts finish) and how long it
    took afterwards."""
    out = sys.stderr if stream is None else stream
    tty = _on_terminal(out)
    progress = Progress(what, total, out, tty)
    if tty:
        out.write(progress._line())
        out.flush()
    start = time.perf_counter()
    ok = False
    try:
        yield progress
        ok = True
    finally:
        ms = (time.perf_counter() - start) * 1e3
        status = f"done in {ms:.1f} ms" if ok else f"failed after {ms:.1f} ms"
        if tty:
            out.write(f"\r\x1b[K{what} ... {status}\n")
            out.flush()
        else:
            log.info("%s: %s", what, status)


@contextmanager
def step(what: str, stream: TextIO | None = None) -> Iterator[None]:
    """`task` for a step without parts."""
    with task(what, None, stream):
        yield
