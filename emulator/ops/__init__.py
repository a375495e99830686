"""Handlers of the instruction set, one module per kind of op; each registers its handler
factories with the op registry (emulator.program.ops.handles) beside their definitions.

Importing this package imports every handler module, so every op of the registry has its
handler; an op without one (or a handler for an op the registry lacks) fails here, at import.
"""
from __future__ import annotations

from emulator.ops import collective, control, conv, convert, elementwise, indexing, kernel, lapack, linalg, norm, reduce  # noqa: F401
from emulator.ops import rng, send_recv, shape, sort  # noqa: F401
from emulator.program.ops import OPS

_missing = sorted(name for name, spec in OPS.items() if spec.handler is None)
assert not _missing, f"ops without handlers: {_missing}"
