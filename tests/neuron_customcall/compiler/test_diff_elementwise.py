"""Differential tests against XLA:CPU: element-wise math, integer semantics, compare, select,
clamp, conversions, bitcasts and reduce-precision."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tests.neuron_customcall.compiler.ours import CASE_ARGS, case, check_case, rand

import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

# No subnormals: XLA:CPU flushes them to zero, the emulator keeps IEEE subnormals (docs/emulator.md).
SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, np.inf, -np.inf, np.nan, 1e30, -1e30,
                    3.7, -3.7, 2.0**31, -(2.0**31) - 1e3, 300.0, -129.0, 65504.0], np.float32)
X = rand(4, 6, seed=1)
POS = rand(4, 6, seed=2, low=0.1, high=5.0)
UNIT = rand(4, 6, seed=3, low=-0.9, high=0.9)
I32 = np.array([0, 1, -1, 7, -7, 100, -100, 2**31 - 1, -2**31, 3, -3, 13], np.int32)
J32 = np.array([0, 2, 0, -2, 2, -3, 3, -1, -1, 0, 5, -5], np.int32)
U32 = np.array([0, 1, 7, 100, 2**32 - 1, 2**31, 3, 13], np.uint32)
V32 = np.array([0, 2, 0, 3, 7, 2**32 - 1, 1, 0], np.uint32)
SHIFTS = np.array([0, 1, 5, 31, 32, 33, -1, 100, 7, 2, 16, 30], np.int32)
BF = X.astype(ml_dtypes.bfloat16)
F16 = X.astype(np.float16)
F64 = rand(4, 6, seed=4, dtype=np.float64)

UNARY = [
    case("abs", jnp.abs, SPECIAL), case("negate", jnp.negative, SPECIAL), case("exp", jnp.exp, X),
    case("expm1", jnp.expm1, X), case("log", jnp.log, POS), case("log1p", jnp.log1p, POS),
    case("sqrt", jnp.sqrt, POS), case("rsqrt", lax.rsqrt, POS), case("cbrt", jnp.cbrt, X),
    case("tanh", jnp.tanh, X), case("logistic", lax.logistic, X), case("sin", jnp.sin, X),
    case("cos", jnp.cos, X), case("tan", jnp.tan, UNIT), case("floor", jnp.floor, SPECIAL),
    case("ceil", jnp.ceil, SPECIAL), case("round_even", jnp.round, SPECIAL),
    case("round_afz", lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO), SPECIAL),
    case("sign", jnp.sign, SPECIAL), case("is_finite", jnp.isfinite, SPECIAL), case("erf", lax.erf, X * 2),
    case("erf_f64", lax.erf, F64, x64=True), case("exp_f64", jnp.exp, F64, x64=True),
    case("exp_bf16", jnp.exp, BF), case("tanh_f16", jnp.tanh, F16), case("log_bf16", jnp.log, POS.astype(ml_dtypes.bfloat16)),
    case("sqrt_f16", jnp.sqrt, POS.astype(np.float16)), case("erf_inv_chlo", lax.erf_inv, UNIT),
    case("lgamma_chlo", lax.lgamma, POS), case("asin_chlo", jnp.arcsin, UNIT), case("atan_chlo", jnp.arctan, X),
    case("sinh_chlo", jnp.sinh, X), case("acosh_chlo", jnp.arccosh, POS + 1), case("digamma_chlo", lax.digamma, POS),
    case("abs_int", jnp.abs, I32), case("negate_int", jnp.negative, I32), case("sign_int", jnp.sign, I32),
    case("not_int", jnp.invert, I32), case("not_bool", jnp.logical_not, I32 > 0),
    case("popcnt", lax.population_count, I32), case("popcnt_u32", lax.population_count, U32),
    case("clz", lax.clz, I32), case("clz_u8", lax.clz, U32.astype(np.uint8)),
]

BINARY = [
    case("add", jnp.add, X, POS), case("subtract", jnp.subtract, X, POS), case("multiply", jnp.multiply, X, POS),
    case("divide", jnp.divide, X, POS), case("divide_special", jnp.divide, SPECIAL, SPECIAL[::-1]),
    case("remainder_f32", lax.rem, X * 5, POS), case("max_nan", jnp.maximum, SPECIAL, SPECIAL[::-1]),
    case("min_nan", jnp.minimum, SPECIAL, SPECIAL[::-1]), case("power", jnp.power, POS, X),
    case("power_special", lax.pow, SPECIAL, SPECIAL[::-1]), case("atan2", jnp.arctan2, X, POS - 2),
    case("add_bf16", jnp.add, BF, BF * 3), case("mul_f16", jnp.multiply, F16, F16),
    case("divide_f64", jnp.divide, F64, F64 + 3, x64=True),
    case("int_div", lax.div, I32, J32), case("int_rem", lax.rem, I32, J32),
    case("uint_div", lax.div, U32, V32), case("uint_rem", lax.rem, U32, V32),
    case("int_floor_divide", jnp.floor_divide, I32, J32), case("int_mod", jnp.mod, I32, J32),
    case("int_add_wraps", jnp.add, I32, I32), case("int_mul_wraps", jnp.multiply, I32, I32 * 3),
    case("int_max", jnp.maximum, I32, J32), case("int_min", jnp.minimum, I32, J32),
    case("shift_left", lax.shift_left, I32, SHIFTS), case("shift_right_arith", lax.shift_right_arithmetic, I32, SHIFTS),
    case("shift_right_logical", lax.shift_right_logical, I32, SHIFTS),
    case("shift_left_u32", lax.shift_left, U32, V32 % 40), case("shift_right_logical_u32", lax.shift_right_logical, U32, V32 % 40),
    case("and", jnp.bitwise_and, I32, J32), case("or", jnp.bitwise_or, I32, J32), case("xor", jnp.bitwise_xor, I32, J32),
    case("and_bool", jnp.logical_and, I32 > 0, J32 > 0), case("or_bool", jnp.logical_or, I32 > 0, J32 > 0),
    case("xor_bool", jnp.logical_xor, I32 > 0, J32 > 0),
    case("integer_pow", lambda a: lax.integer_pow(a, 5), I32 % 10),
    case("s8_add_wraps", jnp.add, I32.astype(np.int8), J32.astype(np.int8) * 50),
    case("u8_sub_wraps", jnp.subtract, U32.astype(np.uint8), V32.astype(np.uint8)),
    case("s64_mul", jnp.multiply, I32.astype(np.int64) * 99999, J32.astype(np.int64), x64=True),
    case("s64_div", lax.div, I32.astype(np.int64), J32.astype(np.int64), x64=True),
    case("u64_shift", lax.shift_right_logical, U32.astype(np.uint64) << np.uint64(20), V32.astype(np.uint64) % 70, x64=True),
    case("s16_rem", lax.rem, I32.astype(np.int16), J32.astype(np.int16)),
    case("nextafter", jnp.nextafter, X, POS),
]

COMPARE = [
    *[case(f"compare_{d}", getattr(jnp, d), SPECIAL, SPECIAL[::-1]) for d in
      ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")],
    *[case(f"compare_int_{d}", getattr(jnp, d), I32, J32) for d in ("less", "greater_equal", "equal")],
    *[case(f"compare_uint_{d}", getattr(jnp, d), U32, V32) for d in ("less", "greater")],
    case("compare_bf16", jnp.less, BF, BF[::-1]),
    case("select", jnp.where, X > 0, X, POS), case("select_scalar_pred", lambda p, a, b: lax.select(p, a, b),
                                                   np.bool_(True), X, POS),
    case("clamp", lambda x: jnp.clip(x, -0.5, 0.7), X), case("clamp_int", lambda x: jnp.clip(x, -5, 50), I32),
    case("clamp_array_bounds", lax.clamp, X - 1, X, X + POS),
    case("isnan_where", lambda x: jnp.where(jnp.isnan(x), 0.0, x), SPECIAL),
]

_TYPES = [np.float32, np.float16, ml_dtypes.bfloat16, np.int32, np.int8, np.int16, np.uint8, np.uint32, np.bool_]
CONVERT = [
    *[case(f"convert_f32_to_{np.dtype(t).name}", lambda x, t=t: x.astype(t), SPECIAL) for t in _TYPES],
    *[case(f"convert_s32_to_{np.dtype(t).name}", lambda x, t=t: x.astype(t), I32) for t in _TYPES],
    *[case(f"convert_bf16_to_{np.dtype(t).name}", lambda x, t=t: x.astype(t), SPECIAL.astype(ml_dtypes.bfloat16))
      for t in (np.float16, np.int32, np.uint8, np.float32)],
    case("convert_f64_to_f32", lambda x: x.astype(np.float32), SPECIAL.astype(np.float64) * 1e10, x64=True),
    case("convert_f64_to_s64", lambda x: x.astype(np.int64), SPECIAL.astype(np.float64) * 1e10, x64=True),
    case("convert_f32_to_u64", lambda x: x.astype(np.uint64), np.where(np.abs(SPECIAL) < 1e20, SPECIAL, 1).astype(np.float32) * np.float32(2.0**33), x64=True),
    case("convert_s64_to_f16", lambda x: x.astype(np.float16), I32.astype(np.int64), x64=True),
    case("convert_u32_to_f32", lambda x: x.astype(np.float32), U32),
    case("convert_pred_to_f32", lambda x: x.astype(np.float32), I32 > 0),
    case("convert_f32_to_f64", lambda x: x.astype(np.float64), SPECIAL, x64=True),
    case("bitcast_f32_s32", lambda x: lax.bitcast_convert_type(x, jnp.int32), SPECIAL),
    case("bitcast_s32_f32", lambda x: lax.bitcast_convert_type(x, jnp.float32), I32),
    case("bitcast_f32_u8", lambda x: lax.bitcast_convert_type(x, jnp.uint8), SPECIAL),
    case("bitcast_u8_f32", lambda x: lax.bitcast_convert_type(x, jnp.float32), rand(5, 4, dtype=np.uint8, low=0, high=255)),
    case("bitcast_bf16_s16", lambda x: lax.bitcast_convert_type(x, jnp.int16), BF),
    case("bitcast_f64_u32", lambda x: lax.bitcast_convert_type(x, jnp.uint32), F64, x64=True),
    case("reduce_precision_f16", lambda x: lax.reduce_precision(x, 5, 10), SPECIAL),
    case("reduce_precision_bf16", lambda x: lax.reduce_precision(x, 8, 7), SPECIAL * 1.001),
    case("reduce_precision_e4m3", lambda x: lax.reduce_precision(x, 4, 3), X * 100),
]


C64 = (rand(4, 6, seed=7) + 1j * rand(4, 6, seed=8)).astype(np.complex64)
COMPLEX = [
    case("complex_mul_add", lambda a, b: a * b + a, C64, C64[::-1]), case("complex_abs", jnp.abs, C64),
    case("complex_exp", jnp.exp, C64 * 0.5), case("complex_conj_real_imag", lambda z: (jnp.conj(z), z.real, z.imag), C64),
    case("complex_divide", jnp.divide, C64, C64 + 2), case("complex_from_parts", lax.complex, X, POS),
    case("complex_eq", jnp.equal, C64, C64.conj()), case("complex_sqrt_log", lambda z: (jnp.sqrt(z), jnp.log(z)), C64),
    case("complex_matmul", jnp.matmul, C64, C64.T),
]


@pytest.mark.parametrize(CASE_ARGS, UNARY + BINARY + COMPARE + CONVERT + COMPLEX)
def test_matches_xla_cpu(f, args, x64, rtol, atol):
    check_case(f, args, x64, rtol, atol)
