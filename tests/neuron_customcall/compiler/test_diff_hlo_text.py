"""Differential tests on hand-written HLO (text), for opcodes and attributes the frameworks rarely
emit from their Python APIs: map, sort with a general comparator, TOTALORDER compares, variadic
reduce-window, select-and-scatter with a general scatter, scatter with a general update, batch
norm, integer edge cases. The reference is the same module compiled by XLA:CPU (jaxlib)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import hlo
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable
from tests.neuron_customcall.compiler.ours import assert_close, compile_proto, rand

_ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
"""

CASES: dict[str, tuple[str, list[np.ndarray]]] = {
    # was refused: "operand shape (f32[2,2], f32[2,2]) does not match the result (f32[2,2], f32[2,2])"
    "copy_of_a_tuple": ("""
HloModule m
ENTRY e {
  x = f32[2,2] parameter(0)
  y = s32[3] parameter(1)
  t = (f32[2,2], s32[3]) tuple(x, y)
  c = (f32[2,2], s32[3]) copy(t)
  a = f32[2,2] get-tuple-element(c), index=0
  b = s32[3] get-tuple-element(c), index=1
  n = f32[2,2] negate(a)
  ROOT r = (f32[2,2], s32[3]) tuple(n, b)
}""", [rand(2, 2), np.array([1, -2, 3], np.int32)]),
    # XLA's own target: an identity that pins its operand's layout (was "target 'LayoutConstraint' is
    # not supported"; found in XLA's algebraic simplifier tests)
    "layout_constraint_custom_call": ("""
HloModule m
ENTRY e {
  x = f32[6,4,3]{0,1,2} parameter(0)
  c = f32[6,4,3]{0,1,2} custom-call(x), custom_call_target="LayoutConstraint"
  ROOT r = f32[6,4,3]{2,1,0} negate(c)
}""", [rand(6, 4, 3)]),
    # every indexed dim has size 1, so each window is the whole operand (was "cannot reshape")
    "gather_from_size_one_operand": ("""
HloModule m
ENTRY e {
  x = f32[1,5] parameter(0)
  i = s32[3,1] parameter(1)
  ROOT g = f32[3,5] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,5}
}""", [rand(1, 5), np.array([[0], [2], [-1]], np.int32)]),
    "gather_from_size_one_dims_two_indices": ("""
HloModule m
ENTRY e {
  x = f32[1,1,4] parameter(0)
  i = s32[2,3,2] parameter(1)
  ROOT g = f32[2,3,4] gather(x, i), offset_dims={2}, collapsed_slice_dims={0,1}, start_index_map={0,1}, index_vector_dim=2, slice_sizes={1,1,4}
}""", [rand(1, 1, 4), np.array([[[0, 0], [1, 3], [-2, 0]], [[0, 1], [5, 5], [0, 0]]], np.int32)]),
    "map_two_operands": ("""
HloModule m
f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  m = f32[] multiply(a, b)
  c = f32[] constant(1.5)
  ROOT r = f32[] subtract(m, c)
}
ENTRY e {
  x = f32[3,4] parameter(0)
  y = f32[3,4] parameter(1)
  ROOT m = f32[3,4] map(x, y), dimensions={0,1}, to_apply=f
}""", [rand(3, 4), rand(3, 4, seed=1)]),
    "compare_totalorder": ("""
HloModule m
ENTRY e {
  x = f32[8] parameter(0)
  y = f32[8] parameter(1)
  lt = pred[8] compare(x, y), direction=LT, type=TOTALORDER
  eq = pred[8] compare(x, y), direction=EQ, type=TOTALORDER
  ge = pred[8] compare(x, y), direction=GE, type=TOTALORDER
  ROOT t = (pred[8], pred[8], pred[8]) tuple(lt, eq, ge)
}""", [np.array([0.0, -0.0, np.nan, -np.nan, 1, -np.inf, np.nan, 2], np.float32),
       np.array([-0.0, 0.0, 1, np.nan, np.nan, -np.nan, np.nan, 2], np.float32)]),
    "sort_general_comparator_descending_by_abs": ("""
HloModule m
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  aa = f32[] abs(a)
  ab = f32[] abs(b)
  ROOT gt = pred[] compare(aa, ab), direction=GT
}
ENTRY e {
  x = f32[5,9] parameter(0)
  i = s32[5,9] iota(), iota_dimension=1
  ROOT s = (f32[5,9], s32[5,9]) sort(x, i), dimensions={1}, is_stable=true, to_apply=cmp
}""", [np.round(rand(5, 9) * 2) / 2]),
    "sort_lexicographic_two_keys": ("""
HloModule m
cmp {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  c = f32[] parameter(2)
  d = f32[] parameter(3)
  lt = pred[] compare(a, b), direction=LT
  eq = pred[] compare(a, b), direction=EQ
  lt2 = pred[] compare(c, d), direction=GT
  both = pred[] and(eq, lt2)
  ROOT r = pred[] or(lt, both)
}
ENTRY e {
  k = s32[11] parameter(0)
  v = f32[11] parameter(1)
  ROOT s = (s32[11], f32[11]) sort(k, v), dimensions={0}, is_stable=true, to_apply=cmp
}""", [rand(11, dtype=np.int32, low=0, high=3), rand(11, seed=2)]),
    "reduce_window_variadic_argmax": ("""
HloModule m
amax {
  a = f32[] parameter(0)
  i = s32[] parameter(1)
  b = f32[] parameter(2)
  j = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GE
  v = f32[] select(gt, a, b)
  k = s32[] select(gt, i, j)
  ROOT r = (f32[], s32[]) tuple(v, k)
}
ENTRY e {
  x = f32[4,10] parameter(0)
  i = s32[4,10] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  z = s32[] constant(-1)
  ROOT rw = (f32[4,4], s32[4,4]) reduce-window(x, i, ninf, z), window={size=1x3 stride=1x2 pad=0_0x0_0}, to_apply=amax
}""", [rand(4, 10)]),
    "select_and_scatter_general_scatter": ("""
HloModule m
ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=GE
}
mx {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] maximum(a, b)
}
ENTRY e {
  x = f32[6,6] parameter(0)
  s = f32[3,3] parameter(1)
  z = f32[] constant(-10)
  ROOT r = f32[6,6] select-and-scatter(x, s, z), window={size=3x3 stride=2x2 pad=1_1x1_1}, select=ge, scatter=mx
}""", [rand(6, 6), rand(3, 3, seed=1)]),
    "select_and_scatter_tiled_general_scatter": ("""
HloModule m
le {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=LE
}
mx {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] maximum(a, b)
}
ENTRY e {
  x = f32[6,9] parameter(0)
  s = f32[2,3] parameter(1)
  z = f32[] constant(0.25)
  ROOT r = f32[6,9] select-and-scatter(x, s, z), window={size=3x3 stride=3x3}, select=le, scatter=mx
}""", [np.round(rand(6, 9) * 2), rand(2, 3, seed=1)]),
    "conv_batch_group_count": ("""
HloModule m
ENTRY e {
  x = f32[4,3,6,5] parameter(0)
  k = f32[6,3,2,2] parameter(1)
  ROOT c = f32[2,6,5,4] convolution(x, k), window={size=2x2 pad=0_0x0_0}, dim_labels=bf01_oi01->bf01, batch_group_count=2
}""", [rand(4, 3, 6, 5), rand(6, 3, 2, 2, seed=1)]),
    "conv_exotic_dim_labels_dilations": ("""
HloModule m
ENTRY e {
  x = f32[7,3,2,6] parameter(0)
  k = f32[3,3,4,2] parameter(1)
  ROOT c = f32[10,2,4,4] convolution(x, k), window={size=2x3 stride=2x1 pad=1_2x0_1 lhs_dilate=1x2 rhs_dilate=2x1 rhs_reversal=1x0}, dim_labels=0fb1_i1o0->1b0f, feature_group_count=1
}""", [rand(7, 3, 2, 6), rand(3, 3, 4, 2, seed=1)]),
    "conv_feature_groups_1d_f64": ("""
HloModule m
ENTRY e {
  x = f64[2,6,9] parameter(0)
  k = f64[6,2,3] parameter(1)
  ROOT c = f64[2,6,4] convolution(x, k), window={size=3 stride=2}, dim_labels=bf0_oi0->bf0, feature_group_count=3
}""", [rand(2, 6, 9, dtype=np.float64), rand(6, 2, 3, dtype=np.float64, seed=1)]),
    "scatter_general_update_duplicates": ("""
HloModule m
upd {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  two = f32[] constant(2)
  m = f32[] multiply(a, two)
  ROOT r = f32[] add(m, b)
}
ENTRY e {
  x = f32[5,3] parameter(0)
  i = s32[4,1] parameter(1)
  u = f32[4,3] parameter(2)
  ROOT s = f32[5,3] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=upd
}""", [rand(5, 3), np.array([[1], [3], [1], [7]], np.int32), rand(4, 3, seed=3)]),
    "batch_norm_training_inference_grad": ("""
HloModule m
ENTRY e {
  x = f32[4,3,2] parameter(0)
  s = f32[3] parameter(1)
  o = f32[3] parameter(2)
  g = f32[4,3,2] parameter(3)
  t = (f32[4,3,2], f32[3], f32[3]) batch-norm-training(x, s, o), epsilon=0.001, feature_index=1
  y = f32[4,3,2] get-tuple-element(t), index=0
  m = f32[3] get-tuple-element(t), index=1
  v = f32[3] get-tuple-element(t), index=2
  inf = f32[4,3,2] batch-norm-inference(x, s, o, m, v), epsilon=0.001, feature_index=1
  gr = (f32[4,3,2], f32[3], f32[3]) batch-norm-grad(x, s, m, v, g), epsilon=0.001, feature_index=1
  gx = f32[4,3,2] get-tuple-element(gr), index=0
  gs = f32[3] get-tuple-element(gr), index=1
  go = f32[3] get-tuple-element(gr), index=2
  ROOT r = (f32[4,3,2], f32[3], f32[3], f32[4,3,2], f32[4,3,2], f32[3], f32[3]) tuple(y, m, v, inf, gx, gs, go)
}""", [rand(4, 3, 2), rand(3, seed=1), rand(3, seed=2), rand(4, 3, 2, seed=3)]),
    "integer_division_edges": ("""
HloModule m
ENTRY e {
  a = s8[6] parameter(0)
  b = s8[6] parameter(1)
  d = s8[6] divide(a, b)
  r = s8[6] remainder(a, b)
  ua = u16[6] convert(a)
  ub = u16[6] convert(b)
  ud = u16[6] divide(ua, ub)
  ur = u16[6] remainder(ua, ub)
  ROOT t = (s8[6], s8[6], u16[6], u16[6]) tuple(d, r, ud, ur)
}""", [np.array([-128, 7, -7, 5, 0, 127], np.int8), np.array([-1, 0, 2, -3, 0, -128], np.int8)]),
    "shift_out_of_range_s64": ("""
HloModule m
ENTRY e {
  a = s64[5] parameter(0)
  b = s64[5] parameter(1)
  l = s64[5] shift-left(a, b)
  r = s64[5] shift-right-arithmetic(a, b)
  q = s64[5] shift-right-logical(a, b)
  ROOT t = (s64[5], s64[5], s64[5]) tuple(l, r, q)
}""", [np.array([-5, 5, -1, 1 << 40, -(1 << 62)], np.int64), np.array([1, 64, 65, -1, 63], np.int64)]),
    "reduce_non_identity_init": (f"""
HloModule m
{_ADD}
ENTRY e {{
  x = f32[3,4] parameter(0)
  c = f32[] constant(10)
  ROOT r = f32[4] reduce(x, c), dimensions={{0}}, to_apply=add
}}""", [rand(3, 4)]),
    "reduce_empty_dimension": ("""
HloModule m
mx {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] maximum(a, b)
}
ENTRY e {
  x = f32[3,0] parameter(0)
  c = f32[] constant(-3)
  ROOT r = f32[3] reduce(x, c), dimensions={1}, to_apply=mx
}""", [np.zeros((3, 0), np.float32)]),
    "reduce_window_base_dilation_negative_pad": (f"""
HloModule m
{_ADD}
ENTRY e {{
  x = f32[5,4] parameter(0)
  c = f32[] constant(0)
  ROOT r = f32[3,3] reduce-window(x, c), window={{size=3x2 stride=2x2 pad=0_-2x1_1 lhs_dilate=2x1}}, to_apply=add
}}""", [rand(5, 4)]),
    "conditional_index_out_of_range": ("""
HloModule m
b0 {
  p = f32[3] parameter(0)
  ROOT r = f32[3] negate(p)
}
b1 {
  p = f32[3] parameter(0)
  ROOT r = f32[3] exponential(p)
}
ENTRY e {
  i = s32[] parameter(0)
  x = f32[3] parameter(1)
  ROOT c = f32[3] conditional(i, x, x), branch_computations={b0, b1}
}""", [np.int32(5), rand(3)]),
    "dynamic_update_slice_s64_indices": ("""
HloModule m
ENTRY e {
  x = f32[4,5] parameter(0)
  u = f32[2,2] parameter(1)
  i = s64[] parameter(2)
  j = s64[] parameter(3)
  ROOT d = f32[4,5] dynamic-update-slice(x, u, i, j)
}""", [rand(4, 5), rand(2, 2, seed=1), np.int64(-3), np.int64(4)]),
    "gather_batching_dims": ("""
HloModule m
ENTRY e {
  x = f32[3,5,4] parameter(0)
  i = s32[3,2,1] parameter(1)
  ROOT g = f32[3,2,4] gather(x, i), offset_dims={2}, collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1,4}
}""", [rand(3, 5, 4), np.array([[[4], [0]], [[2], [2]], [[9], [1]]], np.int32)]),
    "convert_f32_to_s64_saturating": ("""
HloModule m
ENTRY e {
  x = f32[6] parameter(0)
  a = s64[6] convert(x)
  b = u32[6] convert(x)
  c = s16[6] convert(x)
  ROOT t = (s64[6], u32[6], s16[6]) tuple(a, b, c)
}""", [np.array([1e30, -1e30, np.nan, -3.7, 70000.5, 4.3e9], np.float32)]),
    "round_afz_and_clz_u64": ("""
HloModule m
ENTRY e {
  x = f32[6] parameter(0)
  y = u64[3] parameter(1)
  r = f32[6] round-nearest-afz(x)
  c = u64[3] count-leading-zeros(y)
  ROOT t = (f32[6], u64[3]) tuple(r, c)
}""", [np.array([0.5, -0.5, 1.5, 2.5, -2.49999, 0.49999997], np.float32), np.array([0, 1, 1 << 63], np.uint64)]),
}


def _unique_names(text: str) -> str:
    """XLA wants instruction names unique per module: suffix those of each non-entry computation."""
    out, block, names, comp = [], [], [], None
    for line in text.splitlines():
        head = re.match(r"^(\w[\w.]*) \{$", line)
        if head:
            comp, block, names = head.group(1), [], []
        if comp is None:
            out.append(line)
            continue
        block.append(line)
        m = re.match(r"^\s+(?:ROOT )?([\w.]+) = ", line)
        if m:
            names.append(m.group(1))
        if line == "}":
            body = "\n".join(block)
            for n in names:
                body = re.sub(rf"(?<![\w.]){re.escape(n)}(?![\w.])", f"{n}_{comp}", body)
            out.append(body)
            comp = None
    return "\n".join(out)


@pytest.mark.parametrize("name", sorted(CASES))
def test_hlo_text_matches_xla_cpu(name):
    text, inputs = CASES[name]
    proto = hlo.load(_unique_names(text)).to_bytes()
    ours = compile_proto(proto).run(inputs)
    ref = XlaCpuExecutable(proto).run(inputs)
    assert_close(ours, ref, rtol=1e-5, atol=1e-5)


def test_optimized_hlo_with_fusions_and_bitcasts_runs():
    text = """
HloModule m
fused {
  p0 = f32[2,3]{1,0} parameter(0)
  p1 = f32[2,3]{1,0} parameter(1)
  m = f32[2,3]{1,0} multiply(p0, p1)
  ROOT e = f32[2,3]{1,0} exponential(m)
}
ENTRY e {
  x = f32[6]{0} parameter(0)
  b = f32[2,3]{1,0} bitcast(x)
  s = f32[2,3]{1,0} custom-call(b), custom_call_target="Sharding", sharding={replicated}
  ROOT f = f32[2,3]{1,0} fusion(s, b), kind=kLoop, calls=fused
}"""
    x = rand(6)
    out = compile_proto(hlo.load(_unique_names(text)).to_bytes()).run([x])[0]
    np.testing.assert_allclose(out, np.exp(x * x).reshape(2, 3), rtol=1e-6)
    # a bitcast into another layout reads the buffer in that layout: f32[2,3]{0,1} is column-major
    relaid = text.replace("b = f32[2,3]{1,0} bitcast(x)", "b = f32[2,3]{0,1} bitcast(x)")
    out = compile_proto(hlo.load(_unique_names(relaid)).to_bytes()).run([x])[0]
    b = x.reshape(3, 2).T
    np.testing.assert_allclose(out, np.exp(b * b), rtol=1e-6)
