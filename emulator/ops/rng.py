"""rng-bit-generator: placeholder until the counter-based generators are written."""
from __future__ import annotations

from collections.abc import Callable

from emulator.executor import EmulatorError, Factory, HandlerContext


def _rng_bit_generator(ctx: HandlerContext) -> Callable:
    raise EmulatorError(f"rng_bit_generator algorithm {ctx.attrs['algorithm']} is not implemented")


HANDLERS: dict[str, Factory] = {"rng_bit_generator": _rng_bit_generator}
