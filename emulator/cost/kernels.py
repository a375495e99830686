"""The ``kernel`` instruction: NKI payloads are costed from their IR once, at load time; GpSimd
payloads from the counters of each execution (read after the kernel ran)."""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from emulator.cost.engines import Cost
from emulator.cost.gpsimd import gpsimd_cost
from emulator.cost.kernel_ir import kernel_cost
from emulator.kernel_payload import NKI_IR

log = logging.getLogger(__name__)


def kernel_coster(ctx: Any) -> Callable[[], Cost]:
    """The cost of one execution of a kernel instruction (its handler must be built already: a
    GpSimd payload's handler leaves a probe of its latest counters in the context)."""
    payload = ctx.program.kernels[ctx.attrs["payload"]]
    if payload.kind == NKI_IR:
        from emulator.kernel_ir import serialise

        cost = kernel_cost(serialise.from_bytes(payload.data))
        return lambda: cost
    probe = ctx.counters  # left by the kernel's handler (emulator/ops/kernel.py)
    if probe is None:
        return lambda: {}

    def from_counters() -> Cost:
        latest = probe()
        if latest is None:
            return {}
        return gpsimd_cost(*latest)
    return from_counters
