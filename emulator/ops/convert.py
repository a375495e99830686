"""Conversions: convert (XLA's saturating float->int, NaN->0), stochastic-convert, bitcast-convert
(and bitcast-bits, its form for element types narrower than a byte), reduce-precision."""
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


def _float_bits(dtype: np.dtype) -> int:
    """The bit width of a float type (ml_dtypes' finfo knows the narrow ones: f4e2m1fn is 4)."""
    import ml_dtypes

    return int(ml_dtypes.finfo(dtype).bits) if dtype.kind not in "f" or dtype in NARROW else dtype.itemsize * 8


def stochastic_convert(x: np.ndarray, random: np.ndarray, dst: np.dtype, bits: int = 0) -> np.ndarray:
    """XLA's stochastic-convert of floats to a signed integer type, step for step as XLA's
    StochasticConvertDecomposer writes it (so that its corner cases are XLA's): |x| is truncated
    and rounded up when the unsigned `random` is below the fraction scaled to the random type's
    range (fraction * 2^bits, computed in x's type, f32 for f16, converted with saturation), the
    sign is put back (wrapping), and x at or beyond the result type's bounds, compared in x's type,
    gives the bound. NaN gives 0. The scale and bounds are rounded to x's type as XLA rounds its
    constants: f8e4m3fnuz cannot hold 2^8, its scale is NaN and it never rounds up. `bits`: the
    result's width when narrower than `dst`, which holds it (s4 in s8): the bounds are its own."""
    x = np.asarray(x)
    src = x.dtype
    random_bits = _float_bits(src)
    wide = np.asarray(x, np.float64)  # abs, floor and the fraction are exact in f64 for every type
    magnitude = np.abs(wide)
    truncated = np.floor(magnitude)
    fraction = magnitude - truncated
    scaled_type = np.dtype(np.float32) if src == np.float16 else src
    scale = float(np.asarray(2.0 ** random_bits).astype(scaled_type))
    with np.errstate(invalid="ignore", over="ignore"):
        fixed = np.asarray(fraction * scale).astype(scaled_type)  # one rounding, as XLA's multiply
        round_up = np.asarray(random) < float_to_int(fixed, np.asarray(random).dtype)
        magnitude_int = float_to_int(truncated, dst)
        result = np.where(round_up, magnitude_int + np.asarray(1, dst), magnitude_int)
        result = np.where(wide < 0, -result, result).astype(dst)
        bits = bits or dst.itemsize * 8
        low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        lo = float(np.asarray(float(low)).astype(src))
        hi = float(np.asarray(float(high)).astype(src))
    result = np.where(wide <= lo, np.asarray(low, dst), result)
    return np.where(wide >= hi, np.asarray(high, dst), result)


@handles("stochastic-convert")
def _stochastic_convert(ctx: HandlerContext) -> Callable:
    dst, bits = ctx.dtype, int(ctx.attrs["bits"])
    if ctx.in_dtype(0).kind not in "fV" or ctx.in_dtype(1).kind != "u" or dst.kind != "i" or \
            not 1 < bits <= dst.itemsize * 8:
        raise ValueError(f"stochastic-convert takes a float and an unsigned random operand to a signed integer, "
                         f"not {ctx.in_dtype(0)}, {ctx.in_dtype(1)} -> {bits}-bit {dst}")
    return lambda x, random: stochastic_convert(x, random, dst, bits)


def _patterns(x: np.ndarray, bits: int) -> np.ndarray:
    """The low `bits` bits of each element's storage, as u64 (a sub-byte value is held one to a
    byte: an s4 -1 is the byte 0xff, whose 4-bit pattern is 0xf)."""
    x = np.ascontiguousarray(x)
    storage = x.view(np.dtype(f"u{x.dtype.itemsize}")).astype(np.uint64)
    return storage & np.uint64((1 << bits) - 1) if bits < 64 else storage


def bitcast_bits(x: np.ndarray, src_bits: int, dst_bits: int, dst: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """XLA's bitcast-convert where an element type is narrower than a byte (s4, u4, s2, u2,
    f4e2m1fn), whose values are held one to a byte: a narrower source packs its trailing
    dimension little-endian (element i at bit i * src_bits), a narrower result unpacks it."""
    p = _patterns(x, src_bits)
    if src_bits < dst_bits:
        shifts = np.arange(dst_bits // src_bits, dtype=np.uint64) * np.uint64(src_bits)
        p = np.bitwise_or.reduce(p << shifts, axis=-1)
    elif src_bits > dst_bits:
        shifts = np.arange(src_bits // dst_bits, dtype=np.uint64) * np.uint64(dst_bits)
        p = (p[..., None] >> shifts) & np.uint64((1 << dst_bits) - 1)
    if dst.kind == "i" and dst_bits < dst.itemsize * 8:  # s4 in s8: sign-extend the pattern
        sign = np.uint64(1 << (dst_bits - 1))
        values = p.astype(np.int64) - np.where(p & sign, np.int64(1 << dst_bits), np.int64(0))
        return values.astype(dst).reshape(shape)
    return p.astype(np.dtype(f"u{dst.itemsize}")).view(dst).reshape(shape)


@handles("bitcast-bits")
def _bitcast_bits(ctx: HandlerContext) -> Callable:
    src_bits, dst_bits, dst, out = int(ctx.attrs["src_bits"]), int(ctx.attrs["dst_bits"]), ctx.dtype, ctx.shape
    if max(src_bits, dst_bits) % min(src_bits, dst_bits) or min(src_bits, dst_bits) < 1 or \
            src_bits > ctx.in_dtype(0).itemsize * 8 or dst_bits > dst.itemsize * 8:
        raise ValueError(f"bitcast-bits of {src_bits}-bit {ctx.in_dtype(0)} to {dst_bits}-bit {dst}")
    return lambda x: bitcast_bits(x, src_bits, dst_bits, dst, out)


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
