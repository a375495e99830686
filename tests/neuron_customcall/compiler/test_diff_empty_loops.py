"""While loops over an empty state, from XLA's while-loop simplifier tests (issue 15): the
generated loop runner failed on them ("SyntaxError: invalid syntax" building `loop`), and a loop
without effects over an empty state, even with a condition that is always true, computes nothing:
XLA:CPU returns its (empty) value at once, and so do we; the same for a loop whose body leaves
a non-empty state as it found it."""
from __future__ import annotations

import numpy as np

import emulator
import hlo
from neuron_customcall.compiler import compile_module
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable
from tests.neuron_customcall.compiler.ours import assert_close, compile_proto

ENDLESS = """HloModule EmptyTuple
body {
  loop_var = () parameter(0)
  ROOT tuple = () tuple()
}
always_true {
  param = () parameter(0)
  ROOT constant = pred[] constant(true)
}
ENTRY e {
  tuple.1 = () tuple()
  ROOT while = () while(tuple.1), condition=always_true, body=body
}"""

# the condition draws a random number each time: the loop runs until a draw is below 0.3
RANDOM_EXIT = """HloModule RandomExit
body {
  p = () parameter(0)
  ROOT t = () tuple()
}
cond {
  p = () parameter(0)
  a = f32[] constant(0)
  b = f32[] constant(1)
  r = f32[] rng(a, b), distribution=rng_uniform
  limit = f32[] constant(0.3)
  ROOT go = pred[] compare(r, limit), direction=GE
}
ENTRY e {
  t = () tuple()
  w = () while(t), condition=cond, body=body
  n = s32[] constant(7)
  ROOT r = ((), s32[]) tuple(w, n)
}"""


def test_an_endless_loop_without_effects_over_an_empty_state_returns_at_once_like_xla_cpu() -> None:
    proto = hlo.load(ENDLESS).to_bytes()
    assert compile_proto(proto).run([]) == [] == XlaCpuExecutable(proto).run([])


def test_a_loop_with_effects_over_an_empty_state_runs() -> None:
    """On the emulator directly: jaxlib's converter aborts the process on an rng inside a while
    condition (XLA:CPU's compile too), so neither XLA:CPU nor the PJRT path (which refuses it with
    a named error: tests/neuron_customcall/pjrt/test_mlir_conversion.py) can take this module."""
    exe = emulator.load_artifact(compile_module(hlo.load(RANDOM_EXIT)))
    for _ in range(3):
        assert int(exe.run([])[-1]) == 7


# XLA's while_loop_simplifier_test_13 in short: the body forwards every leaf of a nested state
# (and computes something unused), the condition is always true; and _14: the body sets the
# state to a constant equal to the initial value
FORWARDED = """HloModule Forwarded
body {
  p = ((s32[1]), (s32[2], (f32[3]))) parameter(0)
  ta = (s32[1]) get-tuple-element(p), index=0
  a = s32[1] get-tuple-element(ta), index=0
  unused = s32[1] add(a, a)
  rest = (s32[2], (f32[3])) get-tuple-element(p), index=1
  ROOT t = ((s32[1]), (s32[2], (f32[3]))) tuple(ta, rest)
}
cond {
  p = ((s32[1]), (s32[2], (f32[3]))) parameter(0)
  ROOT go = pred[] constant(true)
}
ENTRY e {
  a = s32[1] parameter(0)
  b = s32[2] parameter(1)
  c = f32[3] parameter(2)
  ta = (s32[1]) tuple(a)
  tc = (f32[3]) tuple(c)
  rest = (s32[2], (f32[3])) tuple(b, tc)
  init = ((s32[1]), (s32[2], (f32[3]))) tuple(ta, rest)
  ROOT w = ((s32[1]), (s32[2], (f32[3]))) while(init), condition=cond, body=body
}"""

RESET = """HloModule Reset
body {
  p = (s32[2], f32[]) parameter(0)
  z = s32[2] constant({0, 5})
  x = f32[] get-tuple-element(p), index=1
  ROOT t = (s32[2], f32[]) tuple(z, x)
}
cond {
  p = (s32[2], f32[]) parameter(0)
  ROOT go = pred[] constant(true)
}
ENTRY e {
  x = f32[] parameter(0)
  z = s32[2] constant({0, 5})
  init = (s32[2], f32[]) tuple(z, x)
  ROOT w = (s32[2], f32[]) while(init), condition=cond, body=body
}"""


def test_an_endless_loop_whose_body_keeps_its_state_returns_it_at_once_like_xla_cpu() -> None:
    """XLA:CPU's simplifier forwards a state the body leaves unchanged and drops the loop, so such a
    loop returns its initial state at once even when its condition is always true (the value any
    run that ends would give: the state never changes); ours did not end (while_loop_simplifier
    tests 13, 14, 23)."""
    for text, inputs in ((FORWARDED, [np.array([3], np.int32), np.array([1, 2], np.int32),
                                      np.array([0.5, -1, 2], np.float32)]),
                         (RESET, [np.float32(1.5)])):
        proto = hlo.load(text).to_bytes()
        ours = compile_proto(proto).run(inputs)
        assert_close(ours, XlaCpuExecutable(proto).run(inputs))
        assert_close(ours, inputs if text is FORWARDED else [np.array([0, 5], np.int32), np.float32(1.5)])


def test_a_body_that_changes_its_state_still_loops() -> None:
    """A constant other than the initial value, or a leaf taken from another position, is a change:
    the loop runs (here until its counter reaches 4, against XLA:CPU)."""
    text = """HloModule Changes
body {
  p = (s32[], s32[2], s32[2]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  a = s32[2] get-tuple-element(p), index=1
  b = s32[2] get-tuple-element(p), index=2
  ROOT t = (s32[], s32[2], s32[2]) tuple(j, b, a)
}
cond {
  p = (s32[], s32[2], s32[2]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  four = s32[] constant(4)
  ROOT go = pred[] compare(i, four), direction=LT
}
ENTRY e {
  i = s32[] parameter(0)
  a = s32[2] parameter(1)
  b = s32[2] parameter(2)
  init = (s32[], s32[2], s32[2]) tuple(i, a, b)
  ROOT w = (s32[], s32[2], s32[2]) while(init), condition=cond, body=body
}"""
    proto = hlo.load(text).to_bytes()
    for start in (0, 1):  # an even and an odd number of swaps
        inputs = [np.int32(start), np.array([1, 2], np.int32), np.array([3, 4], np.int32)]
        assert_close(compile_proto(proto).run(inputs), XlaCpuExecutable(proto).run(inputs))
