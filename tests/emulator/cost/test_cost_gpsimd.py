"""GpSimd payload costs come from the execution's counters through the one GpSimd cost model,
and the kernel instruction's coster reads the counters of the latest run."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from emulator.cost.engines import GPSIMD
from emulator.cost.gpsimd import gpsimd_cost
from emulator.cost.kernels import kernel_coster
from emulator.gpsimd.cost import COST_TABLE, estimate
from emulator.kernel_payload import GPSIMD_OP


def test_costs_are_the_gpsimd_models_estimate():
    counters = {"element_accesses": 100, "stream_bytes": 4096, "tcm_bytes": 8192, "arith_elements": 1600,
                "factory_bytes": 0, "tcm_peak_bytes": 123}
    expected = sum(counters[k] * per for k, per in COST_TABLE.items())
    assert gpsimd_cost(counters, 1) == {GPSIMD: pytest.approx(expected)}
    assert gpsimd_cost(counters, 8) == {GPSIMD: pytest.approx(estimate(counters, 8).cycles)}


def test_kernel_coster_reads_the_latest_run_through_the_context():
    latest = []  # what the handler's probe (GpSimdCall.counters) reports
    program = SimpleNamespace(kernels=[SimpleNamespace(kind=GPSIMD_OP, data=b"")])
    ctx = SimpleNamespace(op="kernel", attrs={"payload": 0}, program=program,
                          counters=lambda: latest[-1] if latest else None)
    cost = kernel_coster(ctx)
    assert cost() == {}
    latest.append(({"arith_elements": 160}, 1))
    assert cost() == {GPSIMD: pytest.approx(10.0)}
    ctx.counters = None  # a handler that left no probe: no GpSimd cost
    assert kernel_coster(ctx)() == {}
