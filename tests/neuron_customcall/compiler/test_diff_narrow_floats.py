"""XLA's narrow float types beyond f16/bf16/f8e5m2/f8e4m3fn (issue 15): f8e4m3, f8e4m3fnuz,
f8e5m2fnuz, f8e4m3b11fnuz, f8e3m4, f8e8m0fnu and f4e2m1fn, against XLA:CPU:
conversions from f32 (rounding, saturation or NaN past the range, as each format defines it),
arithmetic (done in f32 and rounded back, as XLA:CPU upcasts), comparisons, a reduction,
constants and parameters of the type itself. f6e2m3fn and f6e3m2fn stay refused: XLA:CPU compiles
no program with them."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import hlo
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable
from tests.neuron_customcall.compiler.ours import compile_proto

TYPES = {"f8e4m3": ml_dtypes.float8_e4m3, "f8e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
         "f8e5m2fnuz": ml_dtypes.float8_e5m2fnuz, "f8e4m3b11fnuz": ml_dtypes.float8_e4m3b11fnuz,
         "f8e3m4": ml_dtypes.float8_e3m4, "f8e8m0fnu": ml_dtypes.float8_e8m0fnu,
         "f4e2m1fn": ml_dtypes.float4_e2m1fn}
X = np.array([1.5, -2, 0.25, 6, 3.3, -0.5, 1e4, 0, 7.1, -1e-3, 0.1, 2.75], np.float32)


def _same(ours: list[np.ndarray], ref: list[np.ndarray]) -> None:
    for o, r in zip(ours, ref, strict=True):
        assert o.dtype == r.dtype
        np.testing.assert_array_equal(o.astype(np.float32), r.astype(np.float32))


@pytest.mark.parametrize("ty", sorted(TYPES))
def test_arithmetic_and_conversions_match_xla_cpu(ty: str) -> None:
    text = f"""HloModule m
add {{
  x = {ty}[] parameter(0)
  y = {ty}[] parameter(1)
  ROOT r = {ty}[] add(x, y)
}}
ENTRY e {{
  p = f32[12] parameter(0)
  q = {ty}[12] parameter(1)
  c = {ty}[12] convert(p)
  a = {ty}[12] add(c, q)
  m = {ty}[12] multiply(a, c)
  l = pred[12] compare(c, q), direction=LT
  z = {ty}[] convert(f32[] constant(0))
  s = {ty}[] reduce(m, z), dimensions={{0}}, to_apply=add
  d = f32[12] convert(m)
  k = {ty}[2] constant({{1.5, 0.5}})
  ROOT t = ({ty}[12], {ty}[12], pred[12], {ty}[], f32[12], {ty}[2]) tuple(c, m, l, s, d, k)
}}"""
    proto = hlo.load(text).to_bytes()
    inputs = [X, X[::-1].astype(TYPES[ty])]
    _same(compile_proto(proto).run(inputs), XlaCpuExecutable(proto).run(inputs))


@pytest.mark.parametrize("ty", ["f6e2m3fn", "f6e3m2fn"])  # s4, u4, s2, u2: test_diff_sub_byte.py
def test_types_not_run_here_are_compile_errors_naming_them(ty: str) -> None:
    from neuron_customcall.compiler import CompileError, compile_module

    with pytest.raises(CompileError, match=f"element type {ty.upper()} is not supported"):
        compile_module(hlo.load(f"HloModule m\nENTRY e {{\n  p = {ty}[4] parameter(0)\n  ROOT r = f32[4] convert(p)\n}}"))
