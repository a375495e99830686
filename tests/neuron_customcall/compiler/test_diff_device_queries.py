"""get-dimension-size (static shapes), replica-id and partition-id (one replica, one partition),
domain (a sharding-domain marker: the identity),
against XLA:CPU (jaxlib) on the same modules: the opcodes added by following docs/emulator.md's "how
to add an op" recipe."""
from __future__ import annotations

import numpy as np
import pytest

import hlo
from neuron_customcall.compiler import CompileError
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable
from tests.neuron_customcall.compiler.ours import assert_close, compile_proto, rand

_CASES = {
    "get_dimension_size_each_dim": ("""
HloModule m
ENTRY e {
  p = f32[3,5,7] parameter(0)
  a = s32[] get-dimension-size(p), dimensions={0}
  b = s32[] get-dimension-size(p), dimensions={1}
  c = s32[] get-dimension-size(p), dimensions={2}
  ROOT t = (s32[], s32[], s32[]) tuple(a, b, c)
}""", [rand(3, 5, 7)]),
    "get_dimension_size_in_arithmetic": ("""
HloModule m
ENTRY e {
  p = f32[4,6] parameter(0)
  n = s32[] get-dimension-size(p), dimensions={1}
  f = f32[] convert(n)
  b = f32[4,6] broadcast(f), dimensions={}
  ROOT d = f32[4,6] multiply(p, b)
}""", [rand(4, 6)]),
    "get_dimension_size_of_zero_size": ("""
HloModule m
ENTRY e {
  p = s8[0,2] parameter(0)
  ROOT n = s32[] get-dimension-size(p), dimensions={0}
}""", [np.zeros((0, 2), np.int8)]),
    "replica_and_partition_ids": ("""
HloModule m
ENTRY e {
  p = u32[4] parameter(0)
  r = u32[] replica-id()
  q = u32[] partition-id()
  s = u32[] add(r, q)
  b = u32[4] broadcast(s), dimensions={}
  x = u32[4] add(p, b)
  ROOT t = (u32[], u32[], u32[4]) tuple(r, q, x)
}""", [np.array([1, 2, 3, 4], np.uint32)]),
    "domain_is_the_identity": ("""
HloModule m
ENTRY e {
  p = f32[2,3] parameter(0)
  d = f32[2,3] domain(p), domain={kind="sharding", entry={maximal device=0}, exit={maximal device=0}}
  ROOT a = f32[2,3] add(d, p)
}""", [rand(2, 3)]),
}


@pytest.mark.parametrize("name", sorted(_CASES))
def test_matches_xla_cpu(name):
    text, inputs = _CASES[name]
    proto = hlo.load(text).to_bytes()
    ours = compile_proto(proto)
    ref = XlaCpuExecutable(proto).run(inputs)
    for _ in range(2):  # the values are shared by runs: an output is the caller's own
        out = ours.run(inputs)
        assert_close(out, ref, rtol=0, atol=0)
        for a in out:
            assert a.flags.writeable
            a[...] = 7


@pytest.mark.parametrize("body, message", [
    ("  ROOT n = s32[] get-dimension-size(p), dimensions={2}", r"dimension \[2\] out of range"),
    ("  ROOT n = s64[] get-dimension-size(p), dimensions={0}", "gives s32"),
    ("  ROOT r = s32[] replica-id()", "replica-id gives u32"),
    ("  ROOT d = f32[3,2] domain(p), domain={kind=\"sharding\", entry={replicated}, exit={replicated}}",
     "domain result .* differs from its operand"),
])
def test_bad_shapes_are_compile_errors(body, message):
    from neuron_customcall.compiler import compile_module

    with pytest.raises(CompileError, match=message):
        compile_module(hlo.load(f"HloModule m\nENTRY e {{\n  p = f32[2,3] parameter(0)\n{body}\n}}"))
