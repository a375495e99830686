"""A bitcast that changes the layout (XLA's layout normalisation writes them: f16[512,3072]{0,1}
bitcast to f16[3072,512]{1,0}) reinterprets the buffer: it is a transpose of the logical values.
Found by tools/xla_corpus.py on XLA's own emitter tests, where it was refused. The reference is
the memory reinterpretation itself, in NumPy: the operand's elements in its physical order, read
back in the result's physical order. (jaxlib's XLA:CPU path refuses bitcasts, so it can not be
the reference here.)"""
from __future__ import annotations

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


def test_bitcast_changing_layout_and_physical_shape_is_refused_by_name():
    text = """HloModule m
ENTRY e {
  p = f32[4,6]{0,1} parameter(0)
  ROOT b = f32[2,12]{1,0} bitcast(p)
}"""
    with pytest.raises(Exception, match="bitcast that changes both the layout and the physical shape"):
        compile_proto(hlo.load(text).to_bytes())


def test_bitcast_changing_element_type_is_refused_by_name():
    text = """HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  ROOT b = s32[4] bitcast(p)
}"""
    with pytest.raises(Exception, match="bitcast that changes the element type"):
        compile_proto(hlo.load(text).to_bytes())
