"""stochastic-convert (float -> signed integer, rounding up where the unsigned random operand is
below the scaled fraction) against XLA:CPU on the same module, for every float operand type XLA
decomposes with each signed result type: halves and quarters with random operands at 0, the
maximum and between (where the rounding flips), NaN, infinities, signed zeros, values at and
beyond the result type's bounds (compared in the operand's type, as XLA's constants are rounded to
it: f16 cannot hold 2^31 - 1), and f8e4m3fnuz, whose scale 2^8 XLA rounds to NaN (it never
rounds up). Found refused by name in XLA's own stochastic_convert_test module (issue 15)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import emulator
import hlo
from neuron_customcall.compiler import CompileError, compile_module
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable

#: float operand type -> (its NumPy dtype, the unsigned random type of its width)
OPERANDS = {
    "f16": (np.float16, "u16"), "bf16": (ml_dtypes.bfloat16, "u16"), "f32": (np.float32, "u32"),
    "f64": (np.float64, "u64"), "f8e4m3fn": (ml_dtypes.float8_e4m3fn, "u8"), "f8e5m2": (ml_dtypes.float8_e5m2, "u8"),
    "f8e4m3fnuz": (ml_dtypes.float8_e4m3fnuz, "u8"), "f8e3m4": (ml_dtypes.float8_e3m4, "u8"),
    "f4e2m1fn": (ml_dtypes.float4_e2m1fn, "u4"),
}
RANDOM = {"u4": ml_dtypes.uint4, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64}
RESULTS = ("s8", "s16", "s32", "s64", "s4", "s2")


def _module(src: str, rnd: str, dst: str, n: int) -> str:
    return f"""HloModule sc
ENTRY e {{
  x = {src}[{n}] parameter(0)
  r = {rnd}[{n}] parameter(1)
  ROOT s = {dst}[{n}] stochastic-convert(x, r)
}}"""


def _inputs(src: str, rnd: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    dt, rdt = OPERANDS[src][0], RANDOM[rnd]
    top = int(ml_dtypes.iinfo(rdt).max)
    special = [0.5, -0.5, 1.25, -1.25, 2.75, -2.75, 0.0, -0.0, np.nan, np.inf, -np.inf, 7.5, -7.5, 8.5, -8.5,
               127.5, -128.5, 130.0, -300.0, 32767.5, -32769.0, 2.0**31, -(2.0**31), 3e9, -3e9, 2.0**63, 1e300]
    with np.errstate(over="ignore", invalid="ignore"):
        x = np.array(special, np.float64).astype(dt)
        rng = np.random.default_rng(seed)
        x = np.concatenate([x, (rng.standard_normal(64) * 6).astype(dt), (rng.standard_normal(64) * 300).astype(dt)])
    n = x.size
    r = rng.integers(0, top, size=n, endpoint=True, dtype=np.uint64).astype(rdt)
    r[: len(special) // 3] = 0
    r[len(special) // 3: 2 * len(special) // 3] = top
    return x, r


def _run_both(text: str, args: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    module = hlo.load(text)
    ours = emulator.load_artifact(compile_module(module)).run(args)[0]
    ref = XlaCpuExecutable(module.to_bytes()).run(args)[0]
    return ours, ref


@pytest.mark.parametrize("src", sorted(OPERANDS))
@pytest.mark.parametrize("dst", RESULTS)
def test_stochastic_convert_matches_xla_cpu(src: str, dst: str) -> None:
    rnd = OPERANDS[src][1]
    x, r = _inputs(src, rnd, seed=len(src) * 7 + len(dst))
    ours, ref = _run_both(_module(src, rnd, dst, x.size), [x, r])
    assert ours.dtype == ref.dtype
    np.testing.assert_array_equal(ours.astype(np.int64), ref.astype(np.int64), err_msg=f"{src} -> {dst}")


def test_rounding_up_follows_the_random_operand() -> None:
    """1.25 rounds up exactly when the random u32 is below 0.25 * 2^32: the probability is the fraction."""
    x = np.full(6, 1.25, np.float32)
    r = np.array([0, 2**30 - 1, 2**30, 2**31, 2**32 - 1, 2**30 - 2], np.uint32)
    ours, ref = _run_both(_module("f32", "u32", "s32", 6), [x, r])
    np.testing.assert_array_equal(ours, [2, 2, 1, 1, 1, 2])
    np.testing.assert_array_equal(ours, ref)


@pytest.mark.parametrize("src, rnd, dst, match", [
    ("f32", "u32", "u8", "signed integer results only"),
    ("f32", "u32", "f16", "signed integer results only"),
    ("f32", "u16", "s32", "unsigned random operand of 32 bits"),
    ("f32", "s32", "s32", "unsigned random operand of 32 bits"),
    ("s32", "u32", "s8", "operand must be a float type"),
])
def test_what_xla_does_not_define_is_refused_by_name(src: str, rnd: str, dst: str, match: str) -> None:
    with pytest.raises(CompileError, match=match):
        compile_module(hlo.load(_module(src, rnd, dst, 4)))
