"""Conversions: convert (XLA's saturating float->int, NaN->0), bitcast-convert, reduce-precision."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from emulator.ops.common import F32, NARROW
from emulator.program.context import HandlerContext
from emulator.program.ops import handles


def float_to_int(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Truncate toward zero, saturate at the integer range, NaN -> 0 (XLA:CPU's semantics)."""
    x = np.asarray(x)
    if x.dtype in NARROW:
        x = x.astype(F32)
    info = np.iinfo(dt)
    hi = float(info.max) + 1.0  # a power of two, exact in every float type
    lo = float(info.min)
    too_big = x >= hi
    too_small = x < lo
    bad = too_big | too_small | np.isnan(x)
    r = np.trunc(np.where(bad, 0, x)).astype(dt)
    r = np.where(too_big, np.asarray(info.max, dt), r)
    return np.where(too_small, np.asarray(info.min, dt), r)


@handles("convert")
def _convert(ctx: HandlerContext) -> Callable:
    src, dst = ctx.in_dtype(0), ctx.dtype
    if src == dst:
        return lambda x: x
    if dst == np.bool_:
        return lambda x: np.asarray(x) != 0
    if src.kind == "c" and dst.kind != "c":
        return lambda x: np.real(x).astype(dst)
    if dst.kind in "iu" and src.kind in "fV":
        return lambda x: float_to_int(x, dst)
    if src in NARROW and dst in NARROW:
        return lambda x: np.asarray(x).astype(F32).astype(dst)
    if src.kind in "iu" and dst in NARROW:
        # one rounding: ints convert exactly to f64 up to 2^53, then round to the narrow type
        return lambda x: np.asarray(x).astype(np.float64).astype(dst)
    if ctx.shape == () and src.kind in "iuf" and dst.kind == "f" and src not in NARROW and dst not in NARROW:
        return dst.type  # a NumPy scalar, the same C cast, ~4x cheaper than an array's astype
    return lambda x: np.asarray(x).astype(dst)


@handles("bitcast-convert")
def _bitcast_convert(ctx: HandlerContext) -> Callable:
    src, dst, out = ctx.in_dtype(0), ctx.dtype, ctx.shape

    def bitcast(x: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(x).view(dst).reshape(out)
    return bitcast


def reduce_precision(x: np.ndarray, exponent_bits: int, mantissa_bits: int) -> np.ndarray:
    """XLA's ReducePrecision: round the mantissa to nearest even, then clamp the exponent range."""
    x = np.asarray(x)
    orig = x.dtype
    if x.dtype in NARROW:
        x = x.astype(F32)
    if x.dtype == np.float32:
        udt, total_m, total_e = np.uint32, 23, 8
    else:
        x = x.astype(np.float64)
        udt, total_m, total_e = np.uint64, 52, 11
    bits = x.view(udt)
    one = udt(1)
    if mantissa_bits < total_m:
        shift = udt(total_m - mantissa_bits)
        last = (bits >> shift) & one
        bias = (one << (shift - one)) - one + last
        trunc_mask = ~((one << shift) - one) & udt(np.iinfo(udt).max)
        bits = (bits + bias) & trunc_mask
    if exponent_bits < total_e:
        sign_mask = one << udt(total_e + total_m)
        exp_mask = ((one << udt(total_e)) - one) << udt(total_m)
        exp_bias = (1 << (total_e - 1)) - 1
        new_bias = (1 << (exponent_bits - 1)) - 1
        max_exp = udt(exp_bias + new_bias) << udt(total_m)
        min_exp = udt(exp_bias - new_bias) << udt(total_m)
        exp = bits & exp_mask
        overflow = exp > max_exp
        underflow = exp <= min_exp
        bits = np.where(overflow, (bits & sign_mask) | exp_mask, bits)
        bits = np.where(underflow, bits & sign_mask, bits)
    r = bits.astype(udt).view(x.dtype)
    r = np.where(np.isnan(x), x if mantissa_bits > 0 else np.asarray(np.nan, x.dtype), r)
    return r.astype(orig)


@handles("reduce-precision")
def _reduce_precision(ctx: HandlerContext) -> Callable:
    e, m = ctx.attrs["exponent_bits"], ctx.attrs["mantissa_bits"]
    return lambda x: reduce_precision(x, e, m)
