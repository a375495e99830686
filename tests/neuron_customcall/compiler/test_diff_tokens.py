"""Tokens: after-all and add-dependency order effects and carry no data; inside a program they
flow through tuples and loops as XLA:CPU lets them, and a token crossing the program's boundary
(an entry parameter or result, i.e. a host callback's or infeed's) is a clear compile error."""
from __future__ import annotations

import numpy as np
import pytest

import hlo
from neuron_customcall.compiler import CompileError, compile_module
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable
from tests.neuron_customcall.compiler.ours import assert_close, compile_proto, rand

_CASES = {
    "add_dependency_on_a_joined_token": """
HloModule m
ENTRY e {
  p = f32[3] parameter(0)
  t0 = token[] after-all()
  t1 = token[] after-all()
  t = token[] after-all(t0, t1)
  a = f32[3] add-dependency(p, t)
  ROOT r = f32[3] multiply(a, p)
}""",
    "a_token_carried_through_a_loop": """
HloModule m
body {
  s = (s32[], f32[3], token[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  x = f32[3] get-tuple-element(s), index=1
  tk = token[] get-tuple-element(s), index=2
  nt = token[] after-all(tk)
  y = f32[3] add-dependency(x, nt)
  y2 = f32[3] add(y, y)
  ROOT bt = (s32[], f32[3], token[]) tuple(j, y2, nt)
}
cond {
  cs = (s32[], f32[3], token[]) parameter(0)
  ci = s32[] get-tuple-element(cs), index=0
  k = s32[] constant(3)
  ROOT c = pred[] compare(ci, k), direction=LT
}
ENTRY e {
  p = f32[3] parameter(0)
  z0 = s32[] constant(0)
  t0 = token[] after-all()
  w = (s32[], f32[3], token[]) while((s32[], f32[3], token[]) tuple(z0, p, t0)), condition=cond, body=body
  ROOT o = f32[3] get-tuple-element(w), index=1
}""",
}


@pytest.mark.parametrize("name", sorted(_CASES))
def test_matches_xla_cpu(name: str) -> None:
    proto = hlo.load(_CASES[name]).to_bytes()
    x = rand(3)
    assert_close(compile_proto(proto).run([x]), XlaCpuExecutable(proto).run([x]), rtol=0, atol=0)


@pytest.mark.parametrize("body, message", [
    ("  p = f32[2] parameter(0)\n  t = token[] parameter(1)\n  ROOT r = f32[2] add(p, p)",
     "token-typed entry parameter is not supported"),
    ("  p = f32[2] parameter(0)\n  t = token[] after-all()\n  ROOT r = (f32[2], token[]) tuple(p, t)",
     "token-typed entry result is not supported"),
    ("  p = f32[2] parameter(0)\n  ROOT t = token[] after-all(p)", "after-all joins tokens"),
    ("  p = f32[2] parameter(0)\n  t = token[] after-all()\n  ROOT a = f32[3] add-dependency(p, t)",
     "add-dependency result"),
])
def test_bad_uses_are_compile_errors(body: str, message: str) -> None:
    with pytest.raises(CompileError, match=message):
        compile_module(hlo.load(f"HloModule m\nENTRY e {{\n{body}\n}}"))
