"""SPMD launch queries and loops."""

from __future__ import annotations

import builtins
import contextlib
import math

from ..indexing import Idx, symbol
from ..tracer import current, current_or_none

# --- SPMD ------------------------------------------------------------------------------------------

def program_id(axis: int = 0) -> Idx:
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


def _range_args(start, stop, step) -> tuple:
    """``range``'s arguments from beta 2's ``(start, stop=None, step=1)`` (also beta 1's
    ``*args``): one argument is the stop."""
    return (start,) if stop is None and step == 1 else (
        (0, start, step) if stop is None else (start, stop, step))


def affine_range(start, stop=None, step=1) -> _Range:
    """Independent iterations (accumulation with ``+=`` allowed): traced once, run vectorised."""
    return _Range(_range_args(start, stop, step), "affine")


def sequential_range(start, stop=None, step=1) -> _Range:
    """Iterations with loop-carried dependencies: traced once, run one after another."""
    return _Range(_range_args(start, stop, step), "sequential")


def static_range(start, stop=None, step=1) -> range:
    """Fully unrolled at trace time (a plain Python ``range``)."""
    return range(*(int(a) for a in _range_args(start, stop, step)))


# --- launch grids over NeuronCores (beta 1) ---------------------------------------------------------

class nc(int):  # noqa: N801  (NKI's name)
    """``nl.nc(2)``: a grid factor spread over that many physical NeuronCores. The emulator is one
    NeuronCore, so the factor's programs all run on it: as a grid size it is just ``n``."""

    def __new__(cls, n: int):
        if int(n) < 1:
            raise ValueError(f"nl.nc({n}): the number of NeuronCores must be positive")
        return super().__new__(cls, int(n))

    def __mul__(self, other):
        return spmd_dim(self, other)

    def __rmul__(self, other):
        return spmd_dim(other, self)

    def __repr__(self) -> str:
        return f"nl.nc({int(self)})"


class spmd_dim(int):  # noqa: N801
    """``nl.spmd_dim(nl.nc(2), 2)``: one grid dimension made of factors (outer first), some of
    them spread over NeuronCores. Its size is their product; ``program_id`` along it numbers the
    programs as the flattened factors do, which is what the kernel sees on one core too."""

    def __new__(cls, *factors):
        if not factors:
            raise ValueError("nl.spmd_dim needs at least one factor")
        size = math.prod(int(f) for f in factors)
        if size < 1:
            raise ValueError(f"nl.spmd_dim{tuple(factors)}: factors must be positive")
        self = super().__new__(cls, size)
        self.factors = tuple(factors)
        return self

    def __repr__(self) -> str:
        return f"nl.spmd_dim{self.factors!r}"


def lnc_of(grid) -> tuple[int, int, int] | None:
    """Where a launch grid puts its programs on the two cores of a logical NeuronCore:
    ``(axis, stride, 2)`` (program ``p`` runs on core ``(p[axis] // stride) % 2``: the
    ``nl.nc(2)`` factor's digit of its flattened ``spmd_dim``), or None for one core. A logical
    NeuronCore groups one or two physical cores (the LNC guide), so ``nl.nc(n > 2)`` and two
    ``nc`` factors are errors."""
    dims = grid if isinstance(grid, (tuple, list)) else (grid,)
    found = []
    for axis, g in enumerate(dims):
        factors = g.factors if isinstance(g, spmd_dim) else (g,)
        for k, f in enumerate(factors):
            if isinstance(f, nc) and int(f) > 1:
                found.append((axis, math.prod(int(x) for x in factors[k + 1:]), int(f)))
    if not found:
        return None
    if len(found) > 1 or found[0][2] != 2:
        raise ValueError(f"launch grid {list(dims)}: a logical NeuronCore (LNC) is 1 or 2 "
                         "physical cores; use one nl.nc(2) factor")
    return found[0]


@contextlib.contextmanager
def no_reorder():
    """``with nl.no_reorder():`` keeps the block's operations in program order. The emulator
    always executes in program order, so the guarantee holds without doing anything."""
    yield
