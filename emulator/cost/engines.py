"""The engines of the machine model: each has its own timeline in a profile."""
from __future__ import annotations

TENSOR = "tensor"
VECTOR = "vector"
SCALAR = "scalar"
GPSIMD = "gpsimd"
DMA = "dma"
#: Instructions that cost nothing on the device (views, tuples, control flow: their bodies are
#: costed instruction by instruction).
NONE = "none"

#: Display order of the engine tracks.
ENGINES: tuple[str, ...] = (TENSOR, VECTOR, SCALAR, GPSIMD, DMA)

#: An estimate: cycles per engine (most instructions use one engine; a kernel may use several).
Cost = dict[str, float]
