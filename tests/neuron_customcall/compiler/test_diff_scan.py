"""HLO scan against XLA:CPU (jaxlib) on the same modules: one or several inputs and carries,
reverse scans, a scanned dimension other than 0 with array elements, no carries, and shapes
XLA refuses."""
from __future__ import annotations

import numpy as np
import pytest

import hlo
from neuron_customcall.compiler import CompileError, compile_module
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable
from tests.neuron_customcall.compiler.ours import assert_close, compile_proto, rand

_STEP = """
step {
  x = f32[] parameter(0)
  c = f32[] parameter(1)
  s = f32[] add(x, c)
  m = f32[] multiply(c, c)
  ROOT t = (f32[], f32[]) tuple(m, s)
}
"""
_TWO = """
two {
  x = f32[3] parameter(0)
  i = s32[3] parameter(1)
  c = f32[3] parameter(2)
  k = s32[] parameter(3)
  f = f32[3] convert(i)
  a = f32[3] add(x, c)
  b = f32[3] multiply(a, f)
  one = s32[] constant(1)
  n = s32[] add(k, one)
  kb = s32[3] broadcast(k), dimensions={}
  o = s32[3] add(i, kb)
  ROOT t = (f32[3], s32[3], f32[3], s32[]) tuple(b, o, a, n)
}
"""
_CASES = {
    "one_input_one_carry": (_STEP + """ENTRY e {
  p = f32[6] parameter(0)
  z = f32[] parameter(1)
  ROOT r = (f32[6], f32[]) scan(p, z), dimensions={0}, num_carries=1, to_apply=step
}""", [rand(6), np.float32(0.5)]),
    "reverse": (_STEP + """ENTRY e {
  p = f32[6] parameter(0)
  z = f32[] parameter(1)
  ROOT r = (f32[6], f32[]) scan(p, z), dimensions={0}, num_carries=1, is_reverse=true, to_apply=step
}""", [rand(6), np.float32(0.5)]),
    "two_inputs_two_carries_along_dim_1": (_TWO + """ENTRY e {
  p = f32[3,5] parameter(0)
  q = s32[3,5] parameter(1)
  c0 = f32[3] parameter(2)
  k0 = s32[] parameter(3)
  ROOT r = (f32[3,5], s32[3,5], f32[3], s32[]) scan(p, q, c0, k0), dimensions={1}, num_carries=2, to_apply=two
}""", [rand(3, 5), np.arange(15, dtype=np.int32).reshape(3, 5), rand(3, seed=2), np.int32(4)]),
    "two_inputs_reverse_along_dim_1": (_TWO + """ENTRY e {
  p = f32[3,5] parameter(0)
  q = s32[3,5] parameter(1)
  c0 = f32[3] parameter(2)
  k0 = s32[] parameter(3)
  ROOT r = (f32[3,5], s32[3,5], f32[3], s32[]) scan(p, q, c0, k0), dimensions={1}, num_carries=2, is_reverse=true, to_apply=two
}""", [rand(3, 5), np.arange(15, dtype=np.int32).reshape(3, 5), rand(3, seed=2), np.int32(4)]),
    "no_carries": ("""
sq {
  x = f32[] parameter(0)
  ROOT y = f32[] multiply(x, x)
}
ENTRY e {
  p = f32[4] parameter(0)
  ROOT r = f32[4] scan(p), dimensions={0}, num_carries=0, to_apply=sq
}""", [rand(4)]),
}


@pytest.mark.parametrize("name", sorted(_CASES))
def test_matches_xla_cpu(name: str) -> None:
    text, inputs = _CASES[name]
    proto = hlo.load("HloModule m\n" + text).to_bytes()
    ref = XlaCpuExecutable(proto).run(inputs)
    assert_close(compile_proto(proto).run(inputs), ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("root, message", [
    ("ROOT r = (f32[6], f32[]) scan(p, z), dimensions={1}, num_carries=1, to_apply=step", "not a dimension"),
    ("ROOT r = (f32[5], f32[]) scan(p, z), dimensions={0}, num_carries=1, to_apply=step", "stacked along"),
    ("ROOT r = (f32[6], s32[]) scan(p, z), dimensions={0}, num_carries=1, to_apply=step", "does not fit carries"),
])
def test_bad_shapes_are_compile_errors(root: str, message: str) -> None:
    text = "HloModule m\n" + _STEP + f"ENTRY e {{\n  p = f32[6] parameter(0)\n  z = f32[] parameter(1)\n  {root}\n}}"
    with pytest.raises(CompileError, match=message):
        compile_module(hlo.load(text))
