"""SPMD launch queries and loops."""

from __future__ import annotations

import builtins
import math

from ..indexing import Idx, symbol
from ..tracer import current, current_or_none

# --- SPMD ------------------------------------------------------------------------------------------

def program_id(axis: int) -> Idx:
    """This instance's index along grid ``axis`` (symbolic: the grid runs vectorised)."""
    tr = current()
    if not 0 <= int(axis) < builtins.max(1, len(tr.grid)):
        raise tr.error("invalid program axis", f"program_id({axis}) with a grid of {list(tr.grid)}")
    return symbol(f"p{int(axis)}")


def num_programs(axes=None):
    tr = current()
    if axes is None:
        return math.prod(tr.grid)
    if isinstance(axes, (tuple, list)):
        return tuple(tr.grid[a] for a in axes)
    return tr.grid[axes]


def program_ndim() -> int:
    return len(current().grid)


# --- loops -----------------------------------------------------------------------------------------

class _Range:
    """``range(start, stop, step)`` traced once as an IR loop (outside a kernel: a plain range)."""

    def __init__(self, args: tuple, kind: str):
        self.range = range(*(int(a) for a in args))
        self.kind = kind

    def __iter__(self):
        tr = current_or_none()
        if tr is None:
            return iter(self.range)
        r = self.range
        return tr.loop(len(r), self.kind, r.start, r.step)


def affine_range(*args) -> _Range:
    """Independent iterations (accumulation with ``+=`` allowed): traced once, run vectorised."""
    return _Range(args, "affine")


def sequential_range(*args) -> _Range:
    """Iterations with loop-carried dependencies: traced once, run one after another."""
    return _Range(args, "sequential")


def static_range(*args) -> range:
    """Fully unrolled at trace time (a plain Python ``range``)."""
    return range(*args)
