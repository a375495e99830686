"""``nl.random_seed``: the random stream of ``nl.rand`` / ``nl.dropout`` after a seed.

Without a seed every ``random`` instruction draws from its own stream (its trace-time number).
``random_seed(seed)`` makes the following draws functions of the seed tile's *value* and of
their position since the seeding, so that, as NKI's reference shows, seeding twice with the
same value and drawing once after each gives equal tiles.
"""

from __future__ import annotations

from emulator import machine

from ..tile import Tile
from ..tracer import current
from .operands import is_scalar, scalar_value


class _SeedState:
    """The kernel's current seed tile, how many draws were made since it was set, and the loops
    open where it was set (their iterations re-seed, so they do not change the draws)."""

    def __init__(self, tile: Tile, outer: tuple[int, ...]):
        self.tile = tile
        self.draws = 0
        self.outer = outer


def random_seed(seed, *, mask=None) -> None:
    """Seed the generator with ``seed``: a [1, 1] tile on SBUF/PSUM (beta 2) or a 32-bit
    integer (beta 1)."""
    tr = current()
    if mask is not None:
        raise tr.error("random_seed mask", "a masked random_seed is not supported")
    if is_scalar(seed):  # a [1, 1] int32 tile holding it, as nl.full makes one
        seed_tile = Tile(tr, tr.declare((1, 1), "int32", machine.SBUF, name="seed"))
        tr.emit("alloc", seed_tile, fill=int(scalar_value(seed)))
        seed = seed_tile
    if not isinstance(seed, Tile) or not seed.on_chip or tuple(seed.shape) != (1, 1):
        raise tr.error("random_seed operand",
                       f"the seed must be a [1, 1] tile on SBUF or PSUM or an integer, got {seed!r}")
    tr.rng_seed = _SeedState(seed, tuple(int(lp.var[1:]) for lp in tr.open_loops()))


def draw() -> tuple[list[Tile], dict]:
    """The sources and attributes (``seed``, ``outer``) of the next ``random`` instruction."""
    tr = current()
    state: _SeedState | None = tr.rng_seed
    if state is None:
        return [], {"seed": tr.next_seed()}
    state.draws += 1
    return [state.tile], ({"seed": state.draws, "outer": list(state.outer)} if state.outer
                          else {"seed": state.draws})
