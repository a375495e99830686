"""The engines of the machine model: each has its own timeline in a profile."""
from __future__ import annotations

from emulator.machine import DMA, ENGINES, GPSIMD, SCALAR, TENSOR, VECTOR

__all__ = ["DMA", "ENGINES", "GPSIMD", "NONE", "SCALAR", "TENSOR", "VECTOR", "Cost"]

#: Instructions that cost nothing on the device (views, tuples, control flow: their bodies are
#: costed instruction by instruction).
NONE = "none"
#: (ENGINES, from the machine model, is also the display order of the engine tracks.)

#: An estimate: cycles per engine (most instructions use one engine; a kernel may use several).
Cost = dict[str, float]
