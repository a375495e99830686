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
    """The cost of one execution of a kernel instruction (its handler must be built already)."""
    payload = ctx.program.kernels[ctx.attrs["payload"]]
    if payload.kind == NKI_IR:
        from emulator.kernel_ir import serialise

        cost = kernel_cost(serialise.from_bytes(payload.data))
        return lambda: cost
    from emulator.ops.kernel import prepared_payload

    call = prepared_payload(ctx)

    def from_counters() -> Cost:
        counters = getattr(call, "last_counters", None)
        if counters is None:
            return {}
        return gpsimd_cost(counters, call.last_ncores)
    return from_counters
