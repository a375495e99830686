"""Graph-level cost formulas on hand-built instructions: dot follows the nc_matmul tiling
formula, element-wise ops cost by elements (transcendentals on ScalarE), data movement by bytes,
views nothing; every op of the instruction set has a cost function."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from emulator.cost import constants as C
from emulator.cost.engines import DMA, SCALAR, TENSOR, VECTOR
from emulator.cost.graph import PER_EXECUTION, RULES, coster
from emulator.cost.tensor import matmul_cycles, nc_matmul_cycles
from emulator.program.ops import OPS


def _ctx(op, out, *ins, **attrs):
    return SimpleNamespace(op=op, name=f"{op}.1", attrs=attrs, type=out, in_types=list(ins), program=None)


def _dot(m, k, n, dtype="f32", batch=()):
    lhs = [dtype, [*batch, m, k]]
    rhs = [dtype, [*batch, k, n]]
    nb = len(batch)
    return _ctx("dot", ["f32", [*batch, m, n]], lhs, rhs, lhs_contracting=[nb + 1], rhs_contracting=[nb],
                lhs_batch=list(range(nb)), rhs_batch=list(range(nb)), out_perm=[])


def test_every_op_has_a_cost_rule():
    assert all(spec.cost in RULES or spec.cost in PER_EXECUTION for spec in OPS.values())
    assert OPS["kernel"].cost == "kernel" and OPS["all-reduce"].cost == "collective"


def test_nc_matmul_formula_from_the_reference():
    assert nc_matmul_cycles(128, 512, fp32=False) == 512
    assert nc_matmul_cycles(32, 16, fp32=False) == 32      # min(64, 32) dominates a short moving tile
    assert nc_matmul_cycles(128, 16, fp32=False) == 64     # stationary counts at most 64
    assert nc_matmul_cycles(128, 512, fp32=True) == 4 * 512


@pytest.mark.parametrize("m,k,n", [(64, 784, 256), (128, 128, 512), (300, 200, 1000), (1, 1, 1)])
def test_dot_cycles_follow_the_tiled_formula(m, k, n):
    expected = 0.0
    for mt in [128] * (m // 128) + ([m % 128] if m % 128 else []):
        for nt in [512] * (n // 512) + ([n % 512] if n % 512 else []):
            expected += max(min(64, mt), nt) * 4
    expected *= math.ceil(k / 128)
    cost = coster(_dot(m, k, n))()
    assert cost == {TENSOR: C.INSTRUCTION_OVERHEAD_CYCLES + expected}
    assert matmul_cycles(1, m, k, n, fp32=True) == expected


def test_bf16_dot_is_four_times_cheaper_and_batch_multiplies():
    fp32 = coster(_dot(128, 256, 512))()[TENSOR] - C.INSTRUCTION_OVERHEAD_CYCLES
    bf16 = coster(_dot(128, 256, 512, "bf16"))()[TENSOR] - C.INSTRUCTION_OVERHEAD_CYCLES
    assert fp32 == 4 * bf16
    batched = coster(_dot(128, 256, 512, "bf16", batch=(3,)))()[TENSOR] - C.INSTRUCTION_OVERHEAD_CYCLES
    assert batched == 3 * bf16


def test_elementwise_costs_by_elements_on_vector_or_scalar():
    small = coster(_ctx("add", ["f32", [128, 10]], ["f32", [128, 10]], ["f32", [128, 10]]))()
    big = coster(_ctx("add", ["f32", [128, 1000]], ["f32", [128, 1000]], ["f32", [128, 1000]]))()
    assert small == {VECTOR: C.INSTRUCTION_OVERHEAD_CYCLES + 10}
    assert big == {VECTOR: C.INSTRUCTION_OVERHEAD_CYCLES + 1000}
    exp = coster(_ctx("exponential", ["f32", [256, 4]], ["f32", [256, 4]]))()
    assert exp == {SCALAR: C.INSTRUCTION_OVERHEAD_CYCLES + 8}
    assert set(coster(_ctx("compare", ["pred", [4]], ["f32", [4]], ["f32", [4]], direction="LT",
                           total_order=False))()) == {VECTOR}


def test_data_movement_costs_bytes_over_dma_and_views_are_free():
    t = coster(_ctx("transpose", ["f32", [1024, 1024]], ["f32", [1024, 1024]], perm=[1, 0]))()
    assert t == {DMA: C.DMA_FIXED_CYCLES + math.ceil(4 * 1024 * 1024 / C.DMA_BYTES_PER_CYCLE)}
    g = coster(_ctx("gather", ["f32", [10, 64]], ["f32", [1000, 64]], ["s32", [10, 1]]))()
    assert g == {DMA: C.DMA_FIXED_CYCLES + math.ceil(10 * 64 * 4 / C.DMA_BYTES_PER_CYCLE)}
    assert coster(_ctx("reshape", ["f32", [4, 4]], ["f32", [16]]))() == {}
    assert coster(_ctx("broadcast", ["f32", [4, 4]], ["f32", []], dims=[]))() == {}
    assert set(coster(_ctx("broadcast", ["f32", [4, 4]], ["f32", [4]], dims=[1]))()) == {DMA}
    assert coster(_ctx("while", ["f32", [4]], ["f32", [4]], cond=1, body=2))() == {}


def test_clock_is_the_gpsimd_models_one_definition():
    from emulator.gpsimd import cost as gpsimd_cost

    assert C.CLOCK_HZ == gpsimd_cost.CLOCK_HZ
