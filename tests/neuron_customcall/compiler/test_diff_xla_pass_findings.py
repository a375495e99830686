"""Forms that XLA's own pass-test modules (tools/xla_test_hlo.py, run by tools/xla_corpus.py) found
refused or wrong here, written anew and run against XLA:CPU on the same module (issue 15)."""
from __future__ import annotations

import numpy as np
import pytest

import hlo
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable
from tests.neuron_customcall.compiler.ours import compile_proto


def _both(text: str, args: list[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    proto = hlo.load(text).to_bytes()
    return compile_proto(proto).run(args), XlaCpuExecutable(proto).run(args)


@pytest.mark.parametrize("dims, window, out", [
    ([3, 0], "size=1x1 pad=1_1x1_1", [5, 2]),
    ([0, 4], "size=2x2 pad=2_1x0_0 stride=1x2", [2, 2]),
    ([2, 0], "size=1x3 pad=0_0x2_3 lhs_dilate=1x2", [2, 3]),
])
def test_reduce_window_over_a_zero_sized_dimension_counts_its_padding(dims, window, out) -> None:
    """A zero-sized dimension dilates to nothing, but its padding is there: the result is all
    init values (the shape rule took a zero-sized dimension as giving zero; refused before)."""
    d, o = ",".join(map(str, dims)), ",".join(map(str, out))
    text = f"""HloModule zw
add2 {{
  a = f32[] parameter(0)
  b = s32[] parameter(1)
  c = f32[] parameter(2)
  e = s32[] parameter(3)
  s = f32[] add(a, c)
  t = s32[] add(b, e)
  ROOT r = (f32[], s32[]) tuple(s, t)
}}
ENTRY e {{
  x = f32[{d}] parameter(0)
  y = s32[{d}] parameter(1)
  i = f32[] constant(0)
  j = s32[] constant(0)
  ROOT w = (f32[{o}], s32[{o}]) reduce-window(x, y, i, j), window={{{window}}}, to_apply=add2
}}"""
    args = [np.zeros(dims, np.float32), np.zeros(dims, np.int32)]
    ours, ref = _both(text, args)
    for a, b in zip(ours, ref):
        assert a.shape == tuple(out) and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("op", ["add", "multiply", "maximum", "minimum"])
@pytest.mark.parametrize("dims, window", [
    ([2], "size=2 pad=1_1"),
    ([3], "size=3 lhs_dilate=2"),
    ([4, 3], "size=2x3 stride=2x1 pad=1_2x2_0 lhs_dilate=1x3 rhs_dilate=2x1"),
    ([1, 2, 3, 4], "size=2x2x2x2 lhs_dilate=1x1x1x3 pad=1_2x1_0x0_1x2_2"),
])
def test_reduce_window_skips_padding_and_holes_with_any_init(op, dims, window) -> None:
    """XLA applies the init value once per window and skips padding and base-dilation holes; with
    an init that is no identity (here 5) padding with the init counted it once more per padded
    position (XLA's algebraic_simplifier_test_46: a mismatch in every window that reached padding)."""
    d = ",".join(map(str, dims))
    text = f"""HloModule rw
r {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] {op}(a, b)
}}
ENTRY e {{
  x = f32[{d}] parameter(0)
  i = f32[] constant(5)
  ROOT w = reduce-window(x, i), window={{{window}}}, to_apply=r
}}"""
    x = np.random.default_rng(len(dims)).integers(-3, 4, size=dims).astype(np.float32)
    ours, ref = _both(text, [x])
    np.testing.assert_array_equal(ours[0], ref[0])


def test_variadic_reduce_window_skips_padding_and_holes() -> None:
    """The general path (a reducer computation of two operands), with inits that are no identity."""
    text = """HloModule rw2
r {
  a = f32[] parameter(0)
  b = s32[] parameter(1)
  c = f32[] parameter(2)
  d = s32[] parameter(3)
  s = f32[] add(a, c)
  m = s32[] maximum(b, d)
  ROOT t = (f32[], s32[]) tuple(s, m)
}
ENTRY e {
  x = f32[3,4] parameter(0)
  y = s32[3,4] parameter(1)
  i = f32[] constant(2.5)
  j = s32[] constant(7)
  ROOT w = (f32[4,4], s32[4,4]) reduce-window(x, y, i, j), window={size=2x3 pad=1_1x1_1 lhs_dilate=1x2 stride=1x2}, to_apply=r
}"""
    rng = np.random.default_rng(3)
    args = [rng.integers(-3, 4, size=(3, 4)).astype(np.float32), rng.integers(-9, 12, size=(3, 4)).astype(np.int32)]
    ours, ref = _both(text, args)
    for a, b in zip(ours, ref):
        np.testing.assert_array_equal(a, b)
