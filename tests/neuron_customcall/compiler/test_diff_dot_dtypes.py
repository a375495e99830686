"""Dot and convolution with every operand/result element-type combination XLA:CPU accepts, against
XLA:CPU bit for bit (integers) or within the float tolerance.

The regression: s8 x s8 -> s32 (quantised matmuls, `preferred_element_type`) used to accumulate in
int8 and wrap, off by tens of thousands; XLA accumulates in the result type."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import hlo
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable
from tests.neuron_customcall.compiler.ours import assert_close, compile_proto, run_jax

_NP = {"s8": np.int8, "u8": np.uint8, "s16": np.int16, "s32": np.int32, "u32": np.uint32,
       "s64": np.int64, "f16": np.float16, "f32": np.float32, "f64": np.float64, "pred": np.bool_}
_INTS = ["s8", "u8", "s16", "s32", "pred"]
_RESULTS = ["s8", "s16", "s32", "u32", "s64", "f32", "pred"]


def _operand(t: str, shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if t == "pred":
        return rng.integers(0, 2, shape).astype(bool)
    if t[0] in "su":
        info = np.iinfo(_NP[t])
        # values up to +-127 make a 64-term sum overflow 8 and 16 bits: the bug's trigger
        return rng.integers(max(info.min, -128), min(info.max, 127) + 1, shape).astype(_NP[t])
    return rng.standard_normal(shape).astype(_NP[t])


def _check(text: str, inputs: list[np.ndarray]) -> None:
    proto = hlo.load(text).to_bytes()
    try:
        ref = XlaCpuExecutable(proto).run(inputs)
    except Exception as e:  # noqa: BLE001 - a combination XLA:CPU itself refuses is not a case
        pytest.skip(f"XLA:CPU refuses it: {str(e)[:80]}")
    ours = compile_proto(proto).run(inputs)
    if ref[0].dtype.kind in "iub":
        np.testing.assert_array_equal(ours[0], ref[0])
        assert ours[0].dtype == ref[0].dtype
    else:
        assert_close(ours, ref, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("lhs,rhs,res", [
    *itertools.product(["s8", "u8", "s16", "pred"], ["s8", "u8", "pred"], _RESULTS),
    *itertools.product(["f16", "f32", "f64", "s32"], ["f16", "f32", "f64"], ["f16", "f32", "f64"]),
])
def test_dot_accumulates_in_the_result_type(lhs: str, rhs: str, res: str) -> None:
    text = f"""HloModule m
ENTRY e {{
  x = {lhs}[4,64] parameter(0)
  y = {rhs}[64,3] parameter(1)
  ROOT d = {res}[4,3] dot(x, y), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}"""
    _check(text, [_operand(lhs, (4, 64), 0), _operand(rhs, (64, 3), 1)])


@pytest.mark.parametrize("res", ["s16", "s32", "u32"])
def test_batched_transposed_dot_accumulates_in_the_result_type(res: str) -> None:
    text = f"""HloModule m
ENTRY e {{
  x = s8[2,64,4] parameter(0)
  y = u8[2,3,64] parameter(1)
  ROOT d = {res}[2,4,3] dot(x, y), lhs_batch_dims={{0}}, rhs_batch_dims={{0}}, lhs_contracting_dims={{1}}, rhs_contracting_dims={{2}}
}}"""
    _check(text, [_operand("s8", (2, 64, 4), 2), _operand("u8", (2, 3, 64), 3)])


# XLA:CPU refuses convolutions of 8-bit operands of mixed signedness (s8 with u8)
@pytest.mark.parametrize("lhs,rhs,res", [
    (lhs, rhs, res) for lhs, rhs, res in itertools.product(
        ["s8", "u8", "s32"], ["s8", "u8", "s32"], ["s8", "s16", "s32", "u32", "s64", "f32"])
    if {lhs, rhs} != {"s8", "u8"}])
def test_convolution_accumulates_in_the_result_type(lhs: str, rhs: str, res: str) -> None:
    text = f"""HloModule m
ENTRY e {{
  x = {lhs}[1,5,5,16] parameter(0)
  k = {rhs}[3,3,16,4] parameter(1)
  ROOT c = {res}[1,3,3,4] convolution(x, k), window={{size=3x3}}, dim_labels=b01f_01io->b01f
}}"""
    _check(text, [_operand(lhs, (1, 5, 5, 16), 4), _operand(rhs, (3, 3, 16, 4), 5)])


def test_jax_preferred_element_type_int8_matmul() -> None:
    import jax
    import jax.numpy as jnp

    x = _operand("s8", (8, 256), 6)
    w = _operand("s8", (256, 16), 7)

    def f(a, b):
        return jax.lax.dot(a, b, preferred_element_type=jnp.int32)

    ours, ref = run_jax(f, x, w)
    np.testing.assert_array_equal(ours[0], ref[0])
    # the exact answer, which an 8-bit accumulator would miss by far
    np.testing.assert_array_equal(ref[0], x.astype(np.int64) @ w.astype(np.int64))
