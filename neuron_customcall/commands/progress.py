"""Progress display for the commands' long steps (compiling, loading, running).

Why: compiling a large graph or running it on the emulator takes seconds; a silent terminal looks
hung. On a terminal each step shows "step ..." while it runs and its duration when it ends, on
standard error so that standard output stays clean for data; elsewhere (pipes, CI logs) the same
lines go to the log at INFO.
"""
from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

log = logging.getLogger("neuron_customcall.commands")


@contextmanager
def step(what: str, stream: TextIO | None = None) -> Iterator[None]:
    """Shows `what` while the block runs and how long it took afterwards."""
    out = sys.stderr if stream is None else stream
    # -q (errors only) silences the display too
    tty = out.isatty() and logging.getLogger("neuron_customcall").isEnabledFor(logging.WARNING)
    if tty:
        out.write(f"{what} ...")
        out.flush()
    start = time.perf_counter()
    ok = False
    try:
        yield
        ok = True
    finally:
        ms = (time.perf_counter() - start) * 1e3
        status = f"done in {ms:.1f} ms" if ok else f"failed after {ms:.1f} ms"
        if tty:
            out.write(f"\r{what} ... {status}\n")
            out.flush()
        else:
            log.info("%s: %s", what, status)
