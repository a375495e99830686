"""Bounded dynamic shapes (neuron_customcall/compiler/dynamic_padder.py) against XLA:CPU on the same
HLO text: set-dimension-size, get-dimension-size, dynamic-reshape, reshape with
inferred_dimension, and element-wise ops, reductions, dots, concatenates, slices, pads, reverses,
broadcasts and transposes over a dynamic dimension, for several dynamic sizes (0, partial, the
bound). XLA:CPU returns a dynamic array compacted (valid elements first, row-major) in a buffer of
the bound; both sides' valid elements and sizes are compared. What XLA:CPU itself refuses (a dynamic
entry parameter) and what the pass does not handle is refused by name."""
from __future__ import annotations

import math
import os
import re

import numpy as np
import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import hlo  # noqa: E402
from emulator import load_artifact  # noqa: E402
from neuron_customcall.compiler import CompileError, compile_module  # noqa: E402
from neuron_customcall.compiler.dynamic_shapes import has_dynamic_shapes, pad_dynamic_shapes  # noqa: E402
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable  # noqa: E402

_COMPS = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] maximum(a, b)
}
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=LT
}
lt2 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT c = pred[] compare(a, b), direction=LT
}
"""

# name: (body lines defining `r`, the declared shape of r); parameters: x = f32[8,6], y = f32[8,6],
# n = s32[], m = s32[] (sizes), and d = x with dimension 0 of size n, e = y with dimension 1 of size m.
CASES = {
    "elementwise": ("d2 = f32[<=8,6] exponential(d)\n  r = f32[<=8,6] add(d, d2)", "f32[<=8,6]"),
    "compare_select": ("d2 = f32[<=8,6] negate(d)\n  c = pred[<=8,6] compare(d, d2), direction=GT\n"
                       "  r = f32[<=8,6] select(c, d, d2)", "f32[<=8,6]"),
    "reduce_dynamic_dim": ("z = f32[] constant(0)\n  r = f32[6] reduce(d, z), dimensions={0}, to_apply=add",
                           "f32[6]"),
    "reduce_max_dynamic_dim": ("z = f32[] constant(-inf)\n  r = f32[6] reduce(d, z), dimensions={0}, to_apply=max",
                               "f32[6]"),
    "reduce_static_dim": ("z = f32[] constant(0)\n  r = f32[<=8] reduce(d, z), dimensions={1}, to_apply=add",
                          "f32[<=8]"),
    "reduce_all_of_minor_dynamic": ("z = f32[] constant(0)\n  r = f32[] reduce(e, z), dimensions={0,1}, "
                                    "to_apply=add", "f32[]"),
    "dot_contract_dynamic": ("r = f32[6,6] dot(d, d), lhs_contracting_dims={0}, rhs_contracting_dims={0}",
                             "f32[6,6]"),
    "dot_free_dynamic": ("r = f32[<=8,8] dot(d, x), lhs_contracting_dims={1}, rhs_contracting_dims={1}",
                         "f32[<=8,8]"),
    "dot_one_side_dynamic": ("r = f32[6,6] dot(d, y), lhs_contracting_dims={0}, rhs_contracting_dims={0}",
                             "f32[6,6]"),
    "dot_batch_dynamic": ("d3 = f32[<=8,6,1] reshape(d)\n"
                          "  r = f32[<=8,6,6] dot(d3, d3), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
                          "rhs_batch_dims={0}, rhs_contracting_dims={2}", "f32[<=8,6,6]"),
    "dot_minor_contract": ("r = f32[8,8] dot(e, y), lhs_contracting_dims={1}, rhs_contracting_dims={1}",
                           "f32[8,8]"),
    "concat_dynamic_static": ("r = f32[<=16,6] concatenate(d, y), dimensions={0}", "f32[<=16,6]"),
    "concat_dynamic_dynamic": ("d2 = f32[<=8,6] negate(d)\n  r = f32[<=16,6] concatenate(d, d2), dimensions={0}",
                               "f32[<=16,6]"),
    "concat_static_dim": ("r = f32[<=8,12] concatenate(d, d), dimensions={1}", "f32[<=8,12]"),
    "concat_minor_dynamic": ("r = f32[8,<=12] concatenate(e, y), dimensions={1}", "f32[8,<=12]"),
    "slice_offset": ("r = f32[<=4,6] slice(d), slice={[2:6], [0:6]}", "f32[<=4,6]"),
    "slice_prefix": ("r = f32[<=4,6] slice(d), slice={[0:4], [0:6]}", "f32[<=4,6]"),
    "slice_strided": ("r = f32[<=4,6] slice(d), slice={[1:8:2], [0:6]}", "f32[<=4,6]"),
    "slice_static_dim": ("r = f32[<=8,3] slice(d), slice={[0:8], [1:6:2]}", "f32[<=8,3]"),
    "pad_edges": ("z = f32[] constant(-1)\n  r = f32[<=11,6] pad(d, z), padding=1_2x0_0", "f32[<=11,6]"),
    "pad_interior": ("z = f32[] constant(-1)\n  r = f32[<=16,6] pad(d, z), padding=0_1_1x0_0", "f32[<=16,6]"),
    "reverse": ("r = f32[<=8,6] reverse(d), dimensions={0,1}", "f32[<=8,6]"),
    "broadcast": ("r = f32[6,<=8,6] broadcast(d), dimensions={1,2}", "f32[6,<=8,6]"),
    "transpose": ("r = f32[6,<=8] transpose(d), dimensions={1,0}", "f32[6,<=8]"),
    "transpose_minor": ("r = f32[<=6,8] transpose(e), dimensions={1,0}", "f32[<=6,8]"),
    "reshape_inferred": ("r = f32[<=48] reshape(d), inferred_dimension=0", "f32[<=48]"),
    "reshape_split": ("r = f32[<=8,2,3] reshape(d)", "f32[<=8,2,3]"),
    "reshape_minor_dynamic": ("r = f32[<=48] reshape(e), inferred_dimension=0", "f32[<=48]"),
    "dynamic_reshape": ("a = s32[] constant(3)\n  b = s32[] constant(4)\n"
                        "  r = f32[<=6,<=8] dynamic-reshape(x, a, b)", "f32[<=6,<=8]"),
    "dynamic_reshape_sizes": ("r = f32[<=8,<=6] dynamic-reshape(d, m, n)", "f32[<=8,<=6]"),
    "get_dimension_size": ("g = s32[] get-dimension-size(d), dimensions={0}\n  h = s32[] get-dimension-size(d), "
                           "dimensions={1}\n  r = s32[] multiply(g, h)", "s32[]"),
    "minor_dynamic_elementwise": ("r = f32[8,<=6] multiply(e, e)", "f32[8,<=6]"),
    # sizes n and m along one dimension: XLA's implicit broadcast of a size-1 operand, else the smaller
    "sizes_differ_add": ("f = f32[<=8,6] set-dimension-size(y, m), dimensions={0}\n  r = f32[<=8,6] add(d, f)",
                         "f32[<=8,6]"),
    "sizes_differ_compare": ("f = f32[<=8,6] set-dimension-size(y, m), dimensions={0}\n"
                             "  r = pred[<=8,6] compare(f, d), direction=LT", "pred[<=8,6]"),
    "sizes_differ_select": ("f = f32[<=8,6] set-dimension-size(y, m), dimensions={0}\n"
                            "  c = pred[<=8,6] compare(d, d), direction=EQ\n  r = f32[<=8,6] select(c, f, d)",
                            "f32[<=8,6]"),
    # a set-dimension-size declared static keeps the static size
    "set_size_static_result": ("f = f32[8,6] set-dimension-size(x, n), dimensions={0}\n"
                               "  r = s32[] get-dimension-size(f), dimensions={0}", "s32[]"),
    "both_dims": ("b2 = f32[<=8,<=6] set-dimension-size(d, m), dimensions={1}\n  r = f32[<=8,<=6] sine(b2)",
                  "f32[<=8,<=6]"),
}


#: while, conditional and call over dynamic dimensions: (computations, body lines, declared shape of r)
_GROW_BODY = """
grow_body {
  t = (f32[<=8,6], f32[6], s32[]) parameter(0)
  b = f32[<=8,6] get-tuple-element(t), index=0
  acc = f32[6] get-tuple-element(t), index=1
  k = s32[] get-tuple-element(t), index=2
  z = f32[] constant(0)
  s = f32[6] reduce(b, z), dimensions={0}, to_apply=add
  acc2 = f32[6] add(acc, s)
  b2 = f32[<=8,6] negate(b)
  size = s32[] get-dimension-size(b2), dimensions={0}
  one = s32[] constant(1)
  eight = s32[] constant(8)
  size1 = s32[] add(size, one)
  size2 = s32[] minimum(size1, eight)
  b3 = f32[<=8,6] set-dimension-size(b2, size2), dimensions={0}
  k2 = s32[] add(k, one)
  ROOT out = (f32[<=8,6], f32[6], s32[]) tuple(b3, acc2, k2)
}
grow_cond {
  t = (f32[<=8,6], f32[6], s32[]) parameter(0)
  k = s32[] get-tuple-element(t), index=2
  three = s32[] constant(3)
  ROOT c = pred[] compare(k, three), direction=LT
}
"""
_INNER_BODY = """
inner_body {
  t = (f32[8,6], f32[6], s32[]) parameter(0)
  x = f32[8,6] get-tuple-element(t), index=0
  acc = f32[6] get-tuple-element(t), index=1
  k = s32[] get-tuple-element(t), index=2
  d = f32[<=8,6] set-dimension-size(x, k), dimensions={0}
  z = f32[] constant(0)
  s = f32[6] reduce(d, z), dimensions={0}, to_apply=add
  acc2 = f32[6] add(acc, s)
  one = s32[] constant(1)
  k2 = s32[] add(k, one)
  ROOT out = (f32[8,6], f32[6], s32[]) tuple(x, acc2, k2)
}
inner_cond {
  t = (f32[8,6], f32[6], s32[]) parameter(0)
  k = s32[] get-tuple-element(t), index=2
  four = s32[] constant(4)
  ROOT c = pred[] compare(k, four), direction=LT
}
"""
_BRANCHES = """
on_true {
  t = (f32[<=8,6]) parameter(0)
  b = f32[<=8,6] get-tuple-element(t), index=0
  ROOT r = f32[<=8,6] exponential(b)
}
on_false {
  t = (f32[<=8,6]) parameter(0)
  b = f32[<=8,6] get-tuple-element(t), index=0
  size = s32[] get-dimension-size(b), dimensions={0}
  two = s32[] constant(2)
  half = s32[] divide(size, two)
  ROOT r = f32[<=8,6] set-dimension-size(b, half), dimensions={0}
}
static_branch {
  t = (f32[<=8,6]) parameter(0)
  b = f32[<=8,6] get-tuple-element(t), index=0
  z = f32[] constant(0)
  s = f32[6] reduce(b, z), dimensions={0}, to_apply=add
  ROOT r = f32[8,6] broadcast(s), dimensions={1}
}
"""
_CALLEE = """
callee {
  b = f32[<=8,6] parameter(0)
  c = f32[8,6] parameter(1)
  z = f32[] constant(0)
  s = f32[<=8] reduce(b, z), dimensions={1}, to_apply=add
  t = f32[<=8] reduce(c, z), dimensions={1}, to_apply=add
  ROOT r = f32[<=8] multiply(s, t)
}
sets_size {
  c = f32[8,6] parameter(0)
  n = s32[] parameter(1)
  ROOT r = f32[<=8,6] set-dimension-size(c, n), dimensions={0}
}
"""
CALL_CASES = {
    "while_grows_and_reduces": (_GROW_BODY, "z6 = f32[6] constant({0,0,0,0,0,0})\n  k0 = s32[] constant(0)\n"
                                "  t0 = (f32[<=8,6], f32[6], s32[]) tuple(d, z6, k0)\n"
                                "  w = (f32[<=8,6], f32[6], s32[]) while(t0), condition=grow_cond, body=grow_body\n"
                                "  a = f32[6] get-tuple-element(w), index=1\n"
                                "  b = f32[<=8,6] get-tuple-element(w), index=0\n"
                                "  z = f32[] constant(0)\n  sb = f32[6] reduce(b, z), dimensions={0}, to_apply=add\n"
                                "  r = f32[6] add(a, sb)", "f32[6]"),
    "while_result_dynamic": (_GROW_BODY, "z6 = f32[6] constant({0,0,0,0,0,0})\n  k0 = s32[] constant(0)\n"
                             "  t0 = (f32[<=8,6], f32[6], s32[]) tuple(d, z6, k0)\n"
                             "  w = (f32[<=8,6], f32[6], s32[]) while(t0), condition=grow_cond, body=grow_body\n"
                             "  r = f32[<=8,6] get-tuple-element(w), index=0", "f32[<=8,6]"),
    "while_dynamic_inside_only": (_INNER_BODY, "z6 = f32[6] constant({0,0,0,0,0,0})\n  k0 = s32[] constant(0)\n"
                                  "  t0 = (f32[8,6], f32[6], s32[]) tuple(x, z6, k0)\n"
                                  "  w = (f32[8,6], f32[6], s32[]) while(t0), condition=inner_cond, body=inner_body\n"
                                  "  r = f32[6] get-tuple-element(w), index=1", "f32[6]"),
    "conditional_sizes_differ": (_BRANCHES, "three = s32[] constant(3)\n  c = pred[] compare(n, three), direction=GT\n"
                                 "  td = (f32[<=8,6]) tuple(d)\n"
                                 "  r = f32[<=8,6] conditional(c, td, td), true_computation=on_true, "
                                 "false_computation=on_false", "f32[<=8,6]"),
    "conditional_indexed_static_result": (_BRANCHES, "two = s32[] constant(2)\n  i = s32[] remainder(n, two)\n"
                                          "  td = (f32[<=8,6]) tuple(d)\n"
                                          "  r = f32[8,6] conditional(i, td, td), branch_computations={static_branch, "
                                          "static_branch}", "f32[8,6]"),
    "call_dynamic_operand": (_CALLEE, "r = f32[<=8] call(d, x), to_apply=callee", "f32[<=8]"),
    "call_sets_size": (_CALLEE, "c = f32[<=8,6] call(y, n), to_apply=sets_size\n  r = f32[<=8,6] sine(c)",
                       "f32[<=8,6]"),
}
# sort, gather, scatter, reduce-window, dynamic-slice and dynamic-update-slice over a dynamic dimension
CASES.update({
    "sort_dynamic_dim": ("r = f32[<=8,6] sort(d), dimensions={0}, to_apply=lt", "f32[<=8,6]"),
    "sort_static_dim": ("r = f32[<=8,6] sort(d), dimensions={1}, to_apply=lt", "f32[<=8,6]"),
    "sort_keys_values": ("i = s32[8,6] iota(), iota_dimension=0\n  di = s32[<=8,6] set-dimension-size(i, n), "
                         "dimensions={0}\n  s = (f32[<=8,6], s32[<=8,6]) sort(d, di), dimensions={0}, to_apply=lt2\n"
                         "  r = s32[<=8,6] get-tuple-element(s), index=1", "s32[<=8,6]"),
    "sort_minor_dynamic": ("r = f32[8,<=6] sort(e), dimensions={1}, is_stable=true, to_apply=lt", "f32[8,<=6]"),
    "gather_dynamic_indices": ("k = s32[8,1] constant({{7},{0},{3},{3},{5},{1},{6},{2}})\n"
                               "  dk = s32[<=8,1] set-dimension-size(k, n), dimensions={0}\n"
                               "  r = f32[<=8,6] gather(y, dk), offset_dims={1}, collapsed_slice_dims={0}, "
                               "start_index_map={0}, index_vector_dim=1, slice_sizes={1,6}", "f32[<=8,6]"),
    "gather_whole_dynamic_dim": ("k = s32[3,1] constant({{5},{0},{2}})\n"
                                 "  r = f32[3,<=8] gather(d, k), offset_dims={1}, collapsed_slice_dims={1}, "
                                 "start_index_map={1}, index_vector_dim=1, slice_sizes={8,1}", "f32[3,<=8]"),
    "scatter_dynamic_operand": ("k = s32[2,1] constant({{1},{4}})\n  u = f32[2,6] slice(y), slice={[0:2], [0:6]}\n"
                                "  r = f32[<=8,6] scatter(d, k, u), update_window_dims={1}, inserted_window_dims={0}, "
                                "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add", "f32[<=8,6]"),
    "scatter_dynamic_indices": ("k = s32[8,1] constant({{1},{4},{1},{0},{7},{2},{2},{5}})\n"
                                "  dk = s32[<=8,1] set-dimension-size(k, n), dimensions={0}\n"
                                "  du = f32[<=8,6] set-dimension-size(y, n), dimensions={0}\n"
                                "  r = f32[8,6] scatter(x, dk, du), update_window_dims={1}, inserted_window_dims={0}, "
                                "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add", "f32[8,6]"),
    "reduce_window_valid": ("z = f32[] constant(0)\n  r = f32[<=6,6] reduce-window(d, z), window={size=3x1}, "
                            "to_apply=add", "f32[<=6,6]"),
    "reduce_window_strided_max": ("z = f32[] constant(-inf)\n  r = f32[<=4,6] reduce-window(d, z), "
                                  "window={size=2x1 stride=2x1}, to_apply=max", "f32[<=4,6]"),
    "reduce_window_static_dim": ("z = f32[] constant(0)\n  r = f32[<=8,3] reduce-window(d, z), "
                                 "window={size=1x2 stride=1x2}, to_apply=add", "f32[<=8,3]"),
    "dynamic_slice_whole_dim": ("i = s32[] constant(0)\n  j = s32[] constant(2)\n"
                                "  r = f32[<=8,3] dynamic-slice(d, i, j), dynamic_slice_sizes={8,3}", "f32[<=8,3]"),
    "dynamic_update_slice_static_update": ("i = s32[] constant(1)\n  j = s32[] constant(2)\n"
                                           "  u = f32[2,3] slice(y), slice={[0:2], [0:3]}\n"
                                           "  r = f32[<=8,6] dynamic-update-slice(d, u, i, j)", "f32[<=8,6]"),
})


def _module(name: str, body: str, shape: str, computations: str = "") -> str:
    rank = len(re.search(r"\[(.*)\]", shape).group(1).split(",")) if "[]" not in shape else 0
    dynamic = [k for k, dim in enumerate(re.search(r"\[(.*)\]", shape).group(1).split(",")) if "<=" in dim] \
        if rank else []
    lines = [ln.strip() for ln in body.splitlines()]
    sizes = [f"  g{k} = s32[] get-dimension-size(r), dimensions={{{k}}}" for k in dynamic]
    outs = ["r"] + [f"g{k}" for k in dynamic]
    types = [shape] + ["s32[]"] * len(dynamic)
    text = f"""HloModule dyn_{name}
{_COMPS}{computations}
ENTRY main {{
  x = f32[8,6] parameter(0)
  y = f32[8,6] parameter(1)
  n = s32[] parameter(2)
  m = s32[] parameter(3)
  d = f32[<=8,6] set-dimension-size(x, n), dimensions={{0}}
  e = f32[8,<=6] set-dimension-size(y, m), dimensions={{1}}
  {chr(10).join('  ' + ln for ln in lines).strip()}
{chr(10).join(sizes)}
  ROOT out = ({', '.join(types)}) tuple({', '.join(outs)})
}}
"""
    return text


def _xla(text: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    from jaxlib import _hlo

    proto = _hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()
    return XlaCpuExecutable(proto).run(inputs)


def _valid(result: np.ndarray, sizes: list[int], dynamic: bool) -> np.ndarray:
    """The logical array of a result: a dynamic one's valid elements lead the buffer, row-major."""
    if not dynamic:
        return result
    return result.ravel()[:math.prod(sizes)].reshape(sizes)


def _inputs(n: int, m: int) -> list[np.ndarray]:
    rng = np.random.default_rng(n * 10 + m)
    x = rng.standard_normal((8, 6)).astype(np.float32)
    y = rng.standard_normal((8, 6)).astype(np.float32)
    return [x, y, np.int32(n), np.int32(m)]


#: XLA does not clamp a slice's or a window's dynamic size to [0, bound] (XLA:CPU crashes or
#: corrupts memory outside it): the sizes n for which these stay inside
_SLICE_N = {"slice_offset": range(2, 7), "slice_prefix": range(0, 5), "reduce_window_valid": range(3, 9)}
_SIZES = [(5, 4), (0, 6), (8, 1), (1, 0)]
_ALL = {**{name: ("", *case) for name, case in CASES.items()}, **CALL_CASES}
_PARAMS = [(name, n, m) for name in sorted(_ALL) for n, m in _SIZES if n in _SLICE_N.get(name, range(9))]


@pytest.mark.parametrize("name,n,m", _PARAMS)
def test_against_xla_cpu(name: str, n: int, m: int) -> None:
    computations, body, shape = _ALL[name]
    text = _module(name, body, shape, computations)
    inputs = _inputs(n, m)
    ref = _xla(text, inputs)
    ours = load_artifact(compile_module(hlo.load(text))).run(inputs)
    assert len(ours) == len(ref)
    sizes_ref = [int(v) for v in ref[1:]]
    sizes_ours = [int(v) for v in ours[1:]]
    assert sizes_ours == sizes_ref, "dynamic sizes differ"
    declared = hlo.load(text).entry.root.shape.tuple_shapes[0]
    assert ours[0].shape == ref[0].shape and ours[0].dtype == ref[0].dtype
    dims = list(declared.dimensions)
    for k, flag in enumerate(i for i, f in enumerate(declared.is_dynamic_dimension) if f):
        dims[flag] = sizes_ref[k]
    dynamic = any(declared.is_dynamic_dimension)
    a, b = _valid(ours[0], dims, dynamic), _valid(ref[0], dims, dynamic)
    np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5)


def _ours(name: str, body: str, shape: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    return load_artifact(compile_module(hlo.load(_module(name, body, shape)))).run(inputs)


def test_reshape_splitting_and_combining_a_dynamic_dimension_against_numpy() -> None:
    """XLA:CPU refuses this reshape ("both splitted and combined is not supported"); the documented
    semantics: the valid elements in row-major order, reshaped."""
    x, y, n, _ = _inputs(5, 4)
    for m in (4, 2, 0):
        out = _ours("split", "r = f32[<=24,2] reshape(e), inferred_dimension=0", "f32[<=24,2]", [x, y, n, np.int32(m)])
        assert int(out[1]) == 8 * m // 2
        np.testing.assert_array_equal(out[0].ravel()[:8 * m], y[:, :m].ravel())


def test_inferred_dimension_between_static_ones_against_numpy() -> None:
    """A dynamic dimension inferred between static ones: XLA's own tests expect the valid elements
    in row-major order (what this pass gives); jaxlib 0.10.2's XLA:CPU, through StableHLO, reduces
    the whole padded buffer instead (a bug of that path, found by the corpus)."""
    x, y, _, m = _inputs(5, 4)
    body = ("r3 = f32[2,<=12,2] reshape(d), inferred_dimension=1\n  z = f32[] constant(0)\n"
            "  r = f32[2,2] reduce(r3, z), dimensions={1}, to_apply=add")
    for n in (4, 2, 8):
        out = _ours("mid", body, "f32[2,2]", [x, y, np.int32(n), m])[0]
        want = x[:n].reshape(2, -1, 2).sum(axis=1)
        np.testing.assert_allclose(out, want, rtol=1e-5)


def test_slice_of_one_element_is_static() -> None:
    """A size-1 slice of a dynamic dimension has a static result (XLA's inference; XLA:CPU aborts
    on it): the element at the start, whatever the size."""
    x, y, _, m = _inputs(5, 4)
    for n in (5, 1):
        out = _ours("one", "r = f32[1,6] slice(d), slice={[1:2], [0:6]}", "f32[1,6]", [x, y, np.int32(n), m])
        np.testing.assert_array_equal(out[0], x[1:2])


def test_slice_size_is_clamped_to_its_bound() -> None:
    """XLA leaves a slice's size unclamped (8 - 2 = 6 > bound 4) and XLA:CPU then corrupts memory; the
    size here is clamped to [0, bound], so no element past the buffer is ever addressed."""
    x, y, _, m = _inputs(5, 4)
    for n, want in ((8, 4), (1, 0), (4, 2)):
        out = _ours("clamp", "r = f32[<=4,6] slice(d), slice={[2:6], [0:6]}", "f32[<=4,6]", [x, y, np.int32(n), m])
        assert int(out[1]) == want
        np.testing.assert_array_equal(out[0][:want], x[2:2 + want])


def test_reduce_window_size_is_clamped_at_zero() -> None:
    """A window larger than the dynamic size: XLA's size (n + 1 - 3) is negative and XLA:CPU
    crashes; here the result is empty (NumPy: no window fits)."""
    x, y, _, m = _inputs(5, 4)
    computations, body, shape = _ALL["reduce_window_valid"]
    for n, want in ((1, 0), (2, 0), (4, 2)):
        out = _ours("rw", body, shape, [x, y, np.int32(n), m])
        assert int(out[1]) == want
        expect = np.array([x[k:k + 3].sum(axis=0) for k in range(want)], np.float32).reshape(want, 6)
        np.testing.assert_allclose(out[0][:want], expect, rtol=1e-5)


def test_dynamic_update_slice_with_a_smaller_dynamic_update_against_numpy() -> None:
    """Only the update's valid rows are written (XLA's padder rewrite; jaxlib's XLA:CPU fails on it
    with an internal check): rows 3.. of x take y's first min(n, 4) rows, the rest stay x's."""
    body = ("i = s32[] constant(3)\n  j = s32[] constant(0)\n  u = f32[4,6] slice(y), slice={[0:4], [0:6]}\n"
            "  four = s32[] constant(4)\n  s = s32[] minimum(n, four)\n"
            "  du = f32[<=4,6] set-dimension-size(u, s), dimensions={0}\n"
            "  r = f32[8,6] dynamic-update-slice(x, du, i, j)")
    x, y, _, m = _inputs(5, 4)
    for n in (0, 2, 4, 7):
        out = _ours("dus", body, "f32[8,6]", [x, y, np.int32(n), m])[0]
        want = x.copy()
        want[3:3 + min(n, 4)] = y[:min(n, 4)]
        np.testing.assert_array_equal(out, want)


def test_static_modules_are_not_rewritten() -> None:
    m = hlo.load("HloModule s\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT r = f32[4] negate(p)\n}\n")
    assert not has_dynamic_shapes(m) and pad_dynamic_shapes(m) is m


def test_rewrite_leaves_the_callers_module_alone() -> None:
    m = hlo.load(_module("k", *CASES["reduce_dynamic_dim"]))
    before = m.to_text()
    out = pad_dynamic_shapes(m)
    assert m.to_text() == before
    assert not has_dynamic_shapes(out)


def test_reduce_masks_padding_that_holds_nan() -> None:
    """The padding past the dynamic size is not read: NaN there leaves the sum finite (NumPy)."""
    text = _module("nan", *CASES["reduce_dynamic_dim"])
    x, y, _, m = _inputs(5, 4)
    x[5:] = np.nan
    out = load_artifact(compile_module(hlo.load(text))).run([x, y, np.int32(5), m])[0]
    np.testing.assert_allclose(out, x[:5].sum(axis=0), rtol=1e-5)


_REFUSED = {
    "convolution": ("one = f32[] constant(1)\n  k = f32[3,6,2] broadcast(one), dimensions={}\n  d3 = f32[1,<=8,6] reshape(d)\n"
                    "  r = f32[1,<=6,2] convolution(d3, k), window={size=3}, dim_labels=b0f_0io->b0f",
                    "convolution of an array with a dynamic dimension"),
    "reshape_to_static": ("r = f32[48] reshape(d)", "reshape of an array with a dynamic dimension to f32[48]"),
    "dynamic-slice": ("i = s32[] constant(1)\n  r = f32[2,6] dynamic-slice(d, i, i), dynamic_slice_sizes={2,6}",
                      "dynamic-slice of a part of dynamic dimension 0"),
    "gather_part": ("k = s32[2,1] constant({{0},{1}})\n  r = f32[2,3,6] gather(d, k), offset_dims={1,2}, "
                    "collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1, slice_sizes={3,6}",
                    "gather of a part (3 of 8) of dynamic operand dimension 0"),
}


@pytest.mark.parametrize("name", sorted(_REFUSED))
def test_refused_by_name(name: str) -> None:
    body, message = _REFUSED[name]
    shape = re.search(r"r = (\S+) ", body).group(1)
    text = _module(name, body, shape)
    with pytest.raises(CompileError, match=re.escape(message)):
        compile_module(hlo.load(text))


def test_dynamic_entry_parameter_refused() -> None:
    """XLA:CPU refuses it too (PadToStatic is not implemented there)."""
    text = "HloModule p\nENTRY e {\n  p = f32[<=8] parameter(0)\n  ROOT r = f32[<=8] negate(p)\n}\n"
    with pytest.raises(CompileError, match="entry parameter with a dynamic dimension"):
        compile_module(hlo.load(text))


def test_unbounded_dimension_refused() -> None:
    text = ("HloModule u\nENTRY e {\n  p = f32[8] parameter(0)\n  n = s32[] parameter(1)\n"
            "  d = f32[?] set-dimension-size(p, n), dimensions={0}\n  ROOT r = f32[?] negate(d)\n}\n")
    with pytest.raises(CompileError, match="unbounded dynamic dimension"):
        compile_module(hlo.load(text))


def test_dynamic_shape_in_a_reducer_refused() -> None:
    """A computation applied element-wise (here a reducer) is not rewritten: a dynamic shape inside
    it is refused, naming the computation and the instruction that applies it."""
    text = """HloModule c
""" + _COMPS + """
odd_add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  bb = f32[4] broadcast(b), dimensions={}
  two = s32[] constant(2)
  d = f32[<=4] set-dimension-size(bb, two), dimensions={0}
  z = f32[] constant(0)
  s = f32[] reduce(d, z), dimensions={0}, to_apply=add
  ROOT r = f32[] add(a, s)
}
ENTRY e {
  p = f32[8] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=odd_add
}
"""
    with pytest.raises(CompileError, match=r"inside computation odd_add, applied by reduce"):
        compile_module(hlo.load(text))


def test_while_body_that_makes_a_dimension_dynamic_carries_its_size() -> None:
    """A loop whose state is static at entry but declared dynamic, and whose body sets its size:
    the size is carried from the first iteration on (NumPy: the sum of the first k rows)."""
    text = """HloModule w
""" + _COMPS + """
body {
  t = (f32[<=8,6], s32[]) parameter(0)
  b = f32[<=8,6] get-tuple-element(t), index=0
  k = s32[] get-tuple-element(t), index=1
  one = s32[] constant(1)
  k2 = s32[] add(k, one)
  b2 = f32[<=8,6] set-dimension-size(b, k2), dimensions={0}
  ROOT out = (f32[<=8,6], s32[]) tuple(b2, k2)
}
cond {
  t = (f32[<=8,6], s32[]) parameter(0)
  k = s32[] get-tuple-element(t), index=1
  n = s32[] constant(3)
  ROOT c = pred[] compare(k, n), direction=LT
}
ENTRY e {
  x = f32[8,6] parameter(0)
  k0 = s32[] constant(0)
  t0 = (f32[8,6], s32[]) tuple(x, k0)
  w = (f32[<=8,6], s32[]) while(t0), condition=cond, body=body
  b = f32[<=8,6] get-tuple-element(w), index=0
  z = f32[] constant(0)
  ROOT r = f32[6] reduce(b, z), dimensions={0}, to_apply=add
}
"""
    x = np.random.default_rng(3).standard_normal((8, 6)).astype(np.float32)
    out = load_artifact(compile_module(hlo.load(text))).run([x])[0]
    np.testing.assert_allclose(out, x[:3].sum(axis=0), rtol=1e-5)


def test_inferred_dimension_reads_as_xla_reads_it() -> None:
    """`inferred_dimension=k` on reshape is XLA's `dimensions` field of the proto; the text round-trips."""
    from jaxlib import _hlo

    text = _module("inf", *CASES["reshape_inferred"])
    theirs = hlo.load(_hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto(), form="proto")
    ours = hlo.load(text)
    assert hlo.modules_equal(ours, theirs)
    assert "inferred_dimension=0" in ours.to_text()
    assert hlo.modules_equal(hlo.load(ours.to_text()), ours)


@pytest.mark.parametrize("module", ["dynamic_calls", "dynamic_indexing", "dynamic_padder", "dynamic_shapes"])
def test_each_padder_module_imports_first(module: str) -> None:
    """Whichever of the pass's modules a program imports first, it imports (no circle between
    them), and the pass as the pipeline runs it (dynamic_shapes) has every handler registered
    (a fresh interpreter each)."""
    import subprocess
    import sys

    code = (f"import neuron_customcall.compiler.{module}\n"
            "import neuron_customcall.compiler.dynamic_shapes\n"
            "from neuron_customcall.compiler.dynamic_padder import _HANDLERS\n"
            "assert {'while', 'conditional', 'call', 'sort', 'gather', 'scatter', 'reduce-window'} <= set(_HANDLERS)\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
