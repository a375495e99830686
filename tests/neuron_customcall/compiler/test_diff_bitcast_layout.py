"""A bitcast that changes the layout (XLA's layout normalisation writes them: f16[512,3072]{0,1}
bitcast to f16[3072,512]{1,0}) reinterprets the buffer: it is a transpose of the logical values.
Found by tools/xla_corpus.py on XLA's own emitter tests, where it was refused. The reference is
the memory reinterpretation itself, in NumPy: the operand's elements in its physical order, read
back in the result's physical order (and element type). (jaxlib's XLA:CPU path refuses bitcasts, so it can not be
the reference here.)"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import hlo
from tests.neuron_customcall.compiler.ours import compile_proto, rand


def _physical(x: np.ndarray, minor_to_major: list[int]) -> np.ndarray:
    return np.transpose(x, list(reversed(minor_to_major))).ravel()


def _from_physical(flat: np.ndarray, dims: list[int], minor_to_major: list[int]) -> np.ndarray:
    order = list(reversed(minor_to_major))
    phys = flat.reshape([dims[k] for k in order])
    return np.transpose(phys, np.argsort(order))


def _layout(m2m: list[int]) -> str:
    return "{" + ",".join(map(str, m2m)) + "}"


CASES = [
    # (operand dims, operand minor_to_major, result dims, result minor_to_major, dtype)
    ([4, 6], [0, 1], [6, 4], [1, 0], "f32"),
    ([4, 6], [1, 0], [6, 4], [0, 1], "s32"),
    ([2, 3, 5], [0, 2, 1], [3, 5, 2], [2, 1, 0], "f16"),
    ([2, 3, 5], [1, 0, 2], [3, 5, 2], [0, 2, 1], "f32"),
    ([3, 4], [0, 1], [3, 4], [0, 1], "f32"),  # same layout on both sides: no change at all
]


@pytest.mark.parametrize("src,src_m2m,dst,dst_m2m,ty", CASES)
def test_layout_changing_bitcast_is_the_memory_reinterpretation(src, src_m2m, dst, dst_m2m, ty):
    dt = {"f32": np.float32, "s32": np.int32, "f16": np.float16}[ty]
    text = f"""HloModule m
ENTRY e {{
  p = {ty}[{",".join(map(str, src))}]{_layout(src_m2m)} parameter(0)
  b = {ty}[{",".join(map(str, dst))}]{_layout(dst_m2m)} bitcast(p)
  ROOT n = {ty}[{",".join(map(str, dst))}]{_layout(dst_m2m)} negate(b)
}}"""
    x = rand(*src, dtype=dt)
    out = compile_proto(hlo.load(text).to_bytes()).run([x])[0]
    expected = -_from_physical(_physical(x, src_m2m), dst, dst_m2m)
    np.testing.assert_array_equal(out, expected)


#: (operand type, dims, minor_to_major, result type, dims, minor_to_major): the layout and the
#: physical shape change together, or the element type changes (bytes reinterpreted in physical order)
REINTERPRETATIONS = [
    ("f32", [4, 6], [0, 1], "f32", [2, 12], [1, 0]),
    ("f32", [4, 6], [0, 1], "f32", [3, 8], [0, 1]),
    ("s32", [2, 3, 4], [0, 2, 1], "s32", [6, 4], [0, 1]),
    ("f16", [6, 4], [1, 0], "f16", [2, 3, 4], [1, 2, 0]),
    ("f32", [4, 6], [1, 0], "s32", [4, 6], [1, 0]),
    ("f32", [4, 6], [0, 1], "u32", [6, 4], [1, 0]),
    ("f32", [4, 6], [0, 1], "s32", [2, 12], [0, 1]),
    ("f64", [3, 2], [1, 0], "u16", [4, 6], [1, 0]),
    ("bf16", [4, 2], [0, 1], "u8", [2, 8], [1, 0]),
]
NP = {"f32": np.float32, "s32": np.int32, "u32": np.uint32, "f16": np.float16, "f64": np.float64, "u16": np.uint16,
      "u8": np.uint8, "bf16": ml_dtypes.bfloat16}


@pytest.mark.parametrize("ty, src, src_m2m, out_ty, dst, dst_m2m", REINTERPRETATIONS)
def test_bitcast_changing_the_physical_shape_or_type_reinterprets_the_buffer(ty, src, src_m2m, out_ty, dst, dst_m2m):
    """Was refused by name ("bitcast that changes both the layout and the physical shape", "... the
    element type"): three of XLA's algebraic-simplifier modules hold such bitcasts."""
    text = f"""HloModule m
ENTRY e {{
  p = {ty}[{",".join(map(str, src))}]{_layout(src_m2m)} parameter(0)
  ROOT b = {out_ty}[{",".join(map(str, dst))}]{_layout(dst_m2m)} bitcast(p)
}}"""
    x = rand(*src, dtype=NP[ty])
    out = compile_proto(hlo.load(text).to_bytes()).run([x])[0]
    flat = np.ascontiguousarray(_physical(x, src_m2m)).view(NP[out_ty])
    expected = _from_physical(flat, dst, dst_m2m)
    assert out.dtype == expected.dtype
    np.testing.assert_array_equal(np.ascontiguousarray(out).view(np.uint8), np.ascontiguousarray(expected).view(np.uint8))


@pytest.mark.parametrize("text, match", [
    ("p = s4[4] parameter(0)\n  ROOT b = u8[2] bitcast(p)", "narrower than a byte"),
    ("p = f32[4] parameter(0)\n  ROOT b = s16[4] bitcast(p)", "changes the size in bytes"),
])
def test_bitcasts_without_a_meaning_here_are_refused_by_name(text, match):
    with pytest.raises(Exception, match=match):
        compile_proto(hlo.load(f"HloModule m\nENTRY e {{\n  {text}\n}}").to_bytes())
