"""``nisa.rand_get_state`` / ``rand_set_state``: saving and restoring the random stream.

The hardware keeps XORWOW states per compute lane (6 uint32 words on GpSimd, 24 on VectorE).
The emulator's generator is counter-based (kernel_exec's ``random``: every draw is a function of
the stream's seed value and of its position since seeding), so its whole state is one 32-bit
stream value. The saved state is laid out as the reference's: ``dst`` is a uint32 [P, 6]
(GpSimd) or [P, 24] (VectorE) tile; every partition holds the stream value in word 0 and zeros in
the others.

``rand_get_state`` splits the stream, as reading a state and continuing from it does: it draws
one 32-bit value from the current stream, makes it the seed of the stream that continues
(position 0), and writes it into ``dst``. ``rand_set_state(saved)`` seeds the stream with word 0
of partition 0 of ``saved``, copied (later writes to the tile change nothing, as the engine
caches its state). So the draws after a ``rand_set_state`` of a saved state are exactly the
draws that followed the ``rand_get_state`` that saved it, which is the reference's use of the
pair. A state the kernel builds itself seeds a stream too, but its numbers are not the
hardware's XORWOW sequence for those words (no value of the emulator's generator is).
"""

from __future__ import annotations

import math

from emulator import machine

from ..lang import rng as rng_state
from ..tile import Tile
from ..tracer import current
from .emit import enum_name, fail, tile
from .enums import ENGINE_NAMES

#: Words of one compute lane's state, by engine (the reference's XORWOW sizes).
STATE_WORDS = {"gpsimd": 6, "vector": 24}


def _state_tile(t, what: str, engine, api: str) -> tuple[Tile, str]:
    name = enum_name(engine, "engine", ENGINE_NAMES, api)
    eng = "gpsimd" if name in ("unknown", "gpsimd") else name
    if eng not in STATE_WORDS:
        raise fail("invalid engine", f"{api} runs on gpsimd or vector, not {name}")
    x = tile(t, what, api)
    if x.dtype_name != "uint32":
        raise fail("rng state dtype", f"{api}: {what} is a uint32 tile, got {x.dtype_name}")
    memories = (machine.SBUF,) if eng == "gpsimd" else (machine.SBUF, machine.PSUM)
    if x.buffer not in memories:
        raise fail("rng state location", f"{api}: {what} on {eng} is in "
                   f"{'/'.join(memories)}, got {x.buffer}")
    words = math.prod(x.shape[1:]) if x.ndim > 1 else 1
    if x.ndim != 2 or words != STATE_WORDS[eng]:
        raise fail("rng state shape", f"{api}: {what} holds {STATE_WORDS[eng]} uint32 words per "
                   f"partition on {eng} ([P, {STATE_WORDS[eng]}]), got {list(x.shape)}")
    return x, eng


def rand_get_state(dst, engine=None, *, api="nki.isa.rand_get_state") -> Tile:
    """Save the stream into ``dst`` and continue from the saved state (module docstring)."""
    x, _ = _state_tile(dst, "dst", engine, api)
    tr = current()
    srcs, attrs = rng_state.draw()
    value = tr.new("random", (1, 1), "uint32", *srcs, **attrs, bits=True)
    tr.emit("memset", x, 0)
    tr.emit("tensor_copy", x[:, 0:1], value)
    rng_state.random_seed(value)
    return x


def rand_set_state(src_seeds, engine=None, *, api="nki.isa.rand_set_state") -> None:
    """Seed the stream with a saved state (word 0 of partition 0, copied)."""
    x, _ = _state_tile(src_seeds, "src_seeds", engine, api)
    tr = current()
    rng_state.random_seed(tr.new("tensor_copy", (1, 1), "uint32", x[0:1, 0:1]))


__all__ = ["rand_get_state", "rand_set_state", "STATE_WORDS"]
