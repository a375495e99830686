"""A while loop that updates its state in place (dynamic-update-slice on a loop-carried buffer)
copies only the elements it updates, once on entry, when the generated code proves that each
stays the loop's own (emulator.codegen._updated_in_place); otherwise it re-owns its whole state
after every iteration. Either way: the caller's arrays are never written, two state elements that
are one array stay two values, and the answers are XLA:CPU's (counters that wrap, NaNs carried,
zero iterations)."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

import emulator
import emulator.ops.control as control
import hlo
from neuron_customcall.compiler import compile_module
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable
from tests.neuron_customcall.compiler.ours import assert_close, rand

_STATE = "(s32[], f32[8], f32[8], f32[8])"


def _module(name: str, root: str, *, body_extra: str = "", init: str = "tuple(z, b0, b0, b0)", trips: int = 4,
            start: str = "s32[] constant(0)", cond: str = "LT") -> str:
    """A loop writing i+0.5 at row i of element 1 in place; `root` is the body's next state,
    `init` the loop's initial tuple (b0: the caller's buffer). Element 3 accumulates element 2
    read after the update (`seen`): an element that aliases the updated buffer shows there."""
    return f"""HloModule {name}

cond {{
  cp = {_STATE} parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  cn = s32[] constant({trips})
  ROOT c = pred[] compare(ci, cn), direction={cond}
}}

body {{
  p = {_STATE} parameter(0)
  i = s32[] get-tuple-element(p), index=0
  buf = f32[8] get-tuple-element(p), index=1
  other = f32[8] get-tuple-element(p), index=2
  acc = f32[8] get-tuple-element(p), index=3
  fi = f32[] convert(i)
  half = f32[] constant(0.5)
  v = f32[] add(fi, half)
  upd = f32[1] broadcast(v), dimensions={{}}
  nb = f32[8] dynamic-update-slice(buf, upd, i)
  one = s32[] constant(1)
  ni = s32[] add(i, one)
  seen = f32[8] add(other, other)
  nacc = f32[8] add(acc, seen){body_extra}
  ROOT r = {_STATE} {root}
}}

ENTRY main {{
  b0 = f32[8] parameter(0)
  z = {start}
  init = {_STATE} {init}
  w = {_STATE} while(init), condition=cond, body=body
  o1 = f32[8] get-tuple-element(w), index=1
  o2 = f32[8] get-tuple-element(w), index=2
  o3 = f32[8] get-tuple-element(w), index=3
  ROOT o = (f32[8], f32[8], f32[8]) tuple(o1, o2, o3)
}}
"""


CASES = {
    # element 2 starts as the same array as element 1 (the loop must not write through it)
    "aliased_initial_elements": _module("aliased", "tuple(ni, nb, other, nacc)"),
    # the updated buffer becomes two elements: the next in-place write must not reach the other
    "update_result_in_two_elements": _module("twice", "tuple(ni, nb, nb, nacc)"),
    # a reshaped view of the updated buffer is carried beside it
    "view_of_the_update_carried": _module("view", "tuple(ni, nb, rs, nacc)",
                                          body_extra="\n  r2 = f32[2,4] reshape(nb)\n  rs = f32[8] reshape(r2)"),
    # the other element is a fresh value each iteration (the proven case)
    "independent_elements": _module("independent", "tuple(ni, nb, sum, nacc)", body_extra="\n  vb = f32[8] broadcast(v), dimensions={}\n  sum = f32[8] add(other, vb)"),
    # no iteration at all: the result is the initial state, never the caller's array itself
    "zero_iterations": _module("zero", "tuple(ni, nb, other, nacc)", trips=0),
    # the counter wraps from INT_MAX to INT_MIN: negative starts clamp to row 0
    "counter_wraps_around": _module("wraps", "tuple(ni, nb, other, nacc)", start="s32[] constant(2147483645)",
                                    trips=-2147483646, cond="NE"),
}


def _compile(text: str) -> Any:
    return emulator.load_artifact(compile_module(hlo.load(text)))


@contextmanager
def _counting_reowns() -> Iterator[list[int]]:
    original, calls = control._own_state, [0]

    def counted(*args: Any) -> Any:
        calls[0] += 1
        return original(*args)
    control._own_state = counted
    try:
        yield calls
    finally:
        control._own_state = original


@pytest.mark.parametrize("name", sorted(CASES))
def test_in_place_loops_match_xla_cpu_and_leave_the_input_alone(name: str) -> None:
    text = CASES[name]
    exe = _compile(text)
    ref = XlaCpuExecutable(hlo.load(text).to_bytes())
    for seed in range(2):  # a second run starts from the caller's buffer again
        b0 = rand(8, seed=seed)
        before = b0.copy()
        got = exe.run([b0])
        assert_close(got, ref.run([before]), rtol=0, atol=0)
        np.testing.assert_array_equal(b0, before)
        assert not any(np.shares_memory(g, b0) for g in got)
        assert not any(np.shares_memory(got[a], got[b]) for a, b in ((0, 1), (0, 2), (1, 2)))


@pytest.mark.parametrize("name,reowns", [("independent_elements", False), ("aliased_initial_elements", False),
                                         ("update_result_in_two_elements", True), ("view_of_the_update_carried", True)])
def test_the_state_is_reowned_per_iteration_only_when_ownership_is_not_proven(name: str, reowns: bool) -> None:
    with _counting_reowns() as calls:
        exe = _compile(CASES[name])
        exe.run([rand(8)])
    assert (calls[0] > 1) == reowns, calls


def test_a_nan_carried_through_an_in_place_loop_stays_a_nan() -> None:
    """NaN is written into the buffer and carried as a scalar through a select on the scalar path."""
    text = _module("nan", "tuple(ni, nb, nb2, acc)", body_extra="""
  inf = f32[] constant(inf)
  zero = f32[] constant(0)
  nan = f32[] multiply(zero, inf)
  isnan = pred[] compare(fi, fi), direction=NE
  first = pred[] compare(i, one), direction=LT
  pick = f32[] select(first, nan, fi)
  again = f32[] select(isnan, zero, pick)
  u2 = f32[1] broadcast(again), dimensions={}
  nb2 = f32[8] dynamic-update-slice(other, u2, i)""")
    exe = _compile(text)
    b0 = rand(8)
    got = exe.run([b0])
    assert_close(got, XlaCpuExecutable(hlo.load(text).to_bytes()).run([b0]), rtol=0, atol=0)
    assert np.isnan(got[1][0]) and not np.isnan(got[1][1:4]).any()


def test_the_aliasing_cases_read_the_other_element_after_the_update() -> None:
    """The cases above test what they mean to: in the compiled body, the in-place update comes
    before the read of element 2 (`seen`), so a write reaching element 2 would change `acc`."""
    for name in ("aliased_initial_elements", "update_result_in_two_elements", "view_of_the_update_carried"):
        program = _compile(CASES[name])._loaded.program
        (body,) = [c for c in program.computations if any(i.op == "dynamic-update-slice" for i in c.instructions)]
        ops = [(i.op, i.name, i.reuse) for i in body.instructions]
        dus = next(k for k, (op, _, reuse) in enumerate(ops) if op == "dynamic-update-slice" and reuse == 0)
        assert dus < next(k for k, (_, n, _) in enumerate(ops) if n == "seen"), ops
