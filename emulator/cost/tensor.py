"""TensorE: the nc_matmul formula and graph-level dot / convolution tiled onto it.

One nc_matmul multiplies a stationary [K<=128, M<=128] tile by a moving [K<=128, N<=512] tile in
max(min(64, M), N) cycles, four times that for fp32 inputs (nki-api.md). A graph matmul is
tiled as the compiler would: K and M in chunks of 128, N in chunks of 512.
"""
from __future__ import annotations

import math
from typing import Any

from emulator import dtypes as records
from emulator.cost import constants as C
from emulator.cost.engines import TENSOR, Cost



def _fast(r: records.DTypeRecord) -> bool:
    """TensorE's full rate: floats narrower than fp32 (tfloat32 included: fp32 storage, 11
    significand bits) and 8-bit integers."""
    if r.kind == records.FLOAT:
        return r.bits < 32 or (r.precision or 0) < 24
    return r.kind in (records.INT, records.UINT) and r.bits == 8


#: Input dtypes TensorE runs at full rate (program and kernel-IR names); others are fp32-rate.
FAST_DTYPES = records.hlo_names(_fast) | records.nki_names(_fast)


def nc_matmul_cycles(n_stationary: int, n_moving: int, fp32: bool) -> float:
    """Cycles of one nc_matmul: stationary free size, moving free size (nki-api.md)."""
    cycles = max(min(C.MATMUL_MIN_STATIONARY, n_stationary), n_moving)
    return float(cycles * (C.FP32_MATMUL_FACTOR if fp32 else 1))


def matmul_cycles(batch: int, m: int, k: int, n: int, fp32: bool) -> float:
    """Cycles of a [M, K] x [K, N] product (times `batch`) tiled into nc_matmuls."""
    if min(batch, m, k, n) <= 0:
        return 0.0
    k_tiles = math.ceil(k / C.TENSOR_PARTITIONS)
    total = 0.0
    for m_tile in _tiles(m, C.STATIONARY_FMAX):
        for n_tile in _tiles(n, C.MOVING_FMAX):
            total += nc_matmul_cycles(m_tile, n_tile, fp32)
    return batch * k_tiles * total


def _tiles(extent: int, size: int) -> list[int]:
    full, rest = divmod(extent, size)
    return [size] * full + ([rest] if rest else [])


def _is_fp32(dtype: str) -> bool:
    return dtype not in FAST_DTYPES


def dot(ctx: Any) -> Cost:
    """dot_general: batch dims, contracting dims and the free rest of each operand."""
    lhs, rhs = ctx.in_types[0], ctx.in_types[1]
    a = ctx.attrs
    batch = math.prod(lhs[1][d] for d in a["lhs_batch"])
    k = math.prod(lhs[1][d] for d in a["lhs_contracting"])
    used_l, used_r = set(a["lhs_batch"]) | set(a["lhs_contracting"]), set(a["rhs_batch"]) | set(a["rhs_contracting"])
    m = math.prod(s for d, s in enumerate(lhs[1]) if d not in used_l)
    n = math.prod(s for d, s in enumerate(rhs[1]) if d not in used_r)
    fp32 = _is_fp32(lhs[0]) or _is_fp32(rhs[0])
    return {TENSOR: C.INSTRUCTION_OVERHEAD_CYCLES + matmul_cycles(batch, m, k, n, fp32)}


def convolution(ctx: Any) -> Cost:
    """Convolution as im2col and one matmul: M = output positions x batch, K = input features
    per group x kernel taps, N = output features (per group, times the groups)."""
    a = ctx.attrs
    lhs, rhs, out = ctx.in_types[0], ctx.in_types[1], ctx.type
    groups = max(a["feature_group_count"], 1) * max(a["batch_group_count"], 1)
    taps = math.prod(rhs[1][d] for d in a["kernel_spatial"])
    k = rhs[1][a["kernel_input_feature"]] * taps
    n = out[1][a["output_feature"]] // groups
    m = out[1][a["output_batch"]] * math.prod(out[1][d] for d in a["output_spatial"])
    fp32 = _is_fp32(lhs[0]) or _is_fp32(rhs[0])
    return {TENSOR: C.INSTRUCTION_OVERHEAD_CYCLES + matmul_cycles(groups, m, k, max(n, 1), fp32)}
