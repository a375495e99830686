"""While loops over an empty state, from XLA's while-loop simplifier tests (issue 15): the
generated loop runner failed on them ("SyntaxError: invalid syntax" building `loop`), and a loop
without effects over an empty state, even with a condition that is always true, computes nothing:
XLA:CPU returns its (empty) value at once, and so do we."""
from __future__ import annotations

import emulator
import hlo
from neuron_customcall.compiler import compile_module
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable
from tests.neuron_customcall.compiler.ours import compile_proto

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
