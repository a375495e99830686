"""Where in the user's program an HLO instruction came from: the line a profile shows for it.

Why not the innermost recorded frame: JAX records the whole Python stack of each operation, and
its innermost frames are library code (jax's own wrappers, this package's kernel call). The line
that helps is the innermost one the user wrote: the first frame outside this package and outside
installed packages. torch_xla (XLA_IR_DEBUG/XLA_HLO_DEBUG) records the whole stack too: a kernel's
custom-call is made in this package's adapter, several frames inside the user's call.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

#: Files whose frames are library code: this package, and anything installed in site-packages.
_LIBRARY_DIRS = (str(Path(__file__).resolve().parents[1]) + os.sep,)


def is_library(path: str) -> bool:
    return path.startswith(_LIBRARY_DIRS) or f"{os.sep}site-packages{os.sep}" in path


def user_location(inst: Any, memo: dict[tuple, str] | None = None) -> str:
    """"file:line" of the innermost recorded frame of user code that made ``inst``; the
    innermost frame when all are library code; "" when nothing was recorded. ``memo`` (one per
    module: frame ids index that module's table) saves the walk for instructions of one line."""
    md = inst.attributes.metadata
    key = (md.source_file, md.source_line, md.stack_frame_id)
    if memo is not None and key in memo:
        return memo[key]
    where = first_user_frame(inst.source_frames())
    if memo is not None:
        memo[key] = where
    return where


def first_user_frame(frames: Iterable[str]) -> str:
    """The first of ``frames`` ("file:line", innermost first) outside library code, else the
    first one, else ""."""
    first = ""
    for where in frames:
        if not is_library(where.rsplit(":", 1)[0]):
            return where
        first = first or where
    return first
