"""While loops as one generated function (emulator.codegen): loop-invariant instructions run once
per loop instead of once per iteration, and every loop shape still gives XLA:CPU's answer
(state elements updated in place, invariants read by in-place instructions, zero iterations,
bodies whose root is not a tuple, nested loops, one-element states), with the while timeout
and failures naming their instruction as before."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

import emulator
import hlo
from emulator.limits import WHILE_TIMEOUT_ENV
from emulator.program.ops import OPS
from neuron_customcall.compiler import compile_module
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable
from tests.neuron_customcall.compiler.ours import assert_close, rand

_LT_COND = """
cond_{tag} {{
  cp_{tag} = {state} parameter(0)
  ci_{tag} = s32[] get-tuple-element(cp_{tag}), index=0
  cn_{tag} = s32[] constant({trips})
  ROOT clt_{tag} = pred[] compare(ci_{tag}, cn_{tag}), direction=LT
}}
"""


def _cond(tag: str, state: str, trips: int) -> str:
    return _LT_COND.format(tag=tag, state=state, trips=trips)


# exp(W) and its transpose are invariant (W passes through): hoisted; the dot reads x, which changes.
INVARIANT_DOT = "HloModule licm_dot\n" + _cond("a", "(s32[], f32[4], f32[4,4])", 10) + """
body_a {
  bp = (s32[], f32[4], f32[4,4]) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  bx = f32[4] get-tuple-element(bp), index=1
  bw = f32[4,4] get-tuple-element(bp), index=2
  be = f32[4,4] exponential(bw)
  bs = f32[4,4] constant({{0.1,0,0,0},{0,0.1,0,0},{0,0,0.1,0},{0,0,0,0.1}})
  bm = f32[4,4] multiply(be, bs)
  bt = f32[4,4] transpose(bm), dimensions={1,0}
  bd = f32[4] dot(bt, bx), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bh = f32[4] tanh(bd)
  b1 = s32[] constant(1)
  bn = s32[] add(bi, b1)
  ROOT br = (s32[], f32[4], f32[4,4]) tuple(bn, bh, bw)
}

ENTRY main_a {
  x = f32[4] parameter(0)
  w = f32[4,4] parameter(1)
  z = s32[] constant(0)
  init = (s32[], f32[4], f32[4,4]) tuple(z, x, w)
  loop = (s32[], f32[4], f32[4,4]) while(init), condition=cond_a, body=body_a
  ROOT out = f32[4] get-tuple-element(loop), index=1
}
"""

# an invariant (exp(v)) read by an instruction the compiler lets write in place, beside an
# element updated in place by dynamic-update-slice (the buffer)
IN_PLACE = "HloModule in_place\n" + _cond("b", "(s32[], f32[8], f32[2])", 4) + """
body_b {
  p = (s32[], f32[8], f32[2]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  buf = f32[8] get-tuple-element(p), index=1
  v = f32[2] get-tuple-element(p), index=2
  ev = f32[2] exponential(v)
  fi = f32[] convert(i)
  fb = f32[2] broadcast(fi), dimensions={}
  upd = f32[2] add(ev, fb)
  two = s32[] constant(2)
  at = s32[] multiply(i, two)
  nb = f32[8] dynamic-update-slice(buf, upd, at)
  one = s32[] constant(1)
  ni = s32[] add(i, one)
  ROOT r = (s32[], f32[8], f32[2]) tuple(ni, nb, v)
}

ENTRY main_b {
  b0 = f32[8] parameter(0)
  v0 = f32[2] parameter(1)
  z = s32[] constant(0)
  init = (s32[], f32[8], f32[2]) tuple(z, b0, v0)
  w = (s32[], f32[8], f32[2]) while(init), condition=cond_b, body=body_b
  ROOT o = f32[8] get-tuple-element(w), index=1
}
"""

# a hoisted value (exp(v)) becomes the state element that the next iteration updates in place
HOISTED_INTO_STATE = "HloModule hoisted_into_state\n" + _cond("h", "(s32[], f32[4], f32[4], f32[4])", 4) + """
body_h {
  p = (s32[], f32[4], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  a = f32[4] get-tuple-element(p), index=1
  v = f32[4] get-tuple-element(p), index=2
  acc = f32[4] get-tuple-element(p), index=3
  e = f32[4] exponential(v)
  fi = f32[] convert(i)
  c = f32[1] broadcast(fi), dimensions={}
  na = f32[4] dynamic-update-slice(a, c, i)
  nacc = f32[4] add(acc, na)
  one = s32[] constant(1)
  ni = s32[] add(i, one)
  ROOT r = (s32[], f32[4], f32[4], f32[4]) tuple(ni, e, v, nacc)
}

ENTRY main_h {
  a0 = f32[4] parameter(0)
  v0 = f32[4] parameter(1)
  z = s32[] constant(0)
  init = (s32[], f32[4], f32[4], f32[4]) tuple(z, a0, v0, a0)
  w = (s32[], f32[4], f32[4], f32[4]) while(init), condition=cond_h, body=body_h
  ROOT o = f32[4] get-tuple-element(w), index=3
}
"""

# the body's root is an opt-barrier of the tuple, not a tuple instruction
BARRIER_ROOT = "HloModule barrier_root\n" + _cond("c", "(s32[], f32[3])", 5) + """
body_c {
  p = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[3] get-tuple-element(p), index=1
  s = f32[3] sine(x)
  one = s32[] constant(1)
  ni = s32[] add(i, one)
  t = (s32[], f32[3]) tuple(ni, s)
  ROOT o = (s32[], f32[3]) opt-barrier(t)
}

ENTRY main_c {
  x0 = f32[3] parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[3]) tuple(z, x0)
  w = (s32[], f32[3]) while(init), condition=cond_c, body=body_c
  ROOT o = f32[3] get-tuple-element(w), index=1
}
"""

# the inner loop's body reads the outer loop's invariant (m) and the outer counter
NESTED = "HloModule nested\n" + _cond("i", "(s32[], f32[3], f32[3])", 3) + _cond("o", "(s32[], f32[3], f32[3])", 4) + """
body_i {
  p = (s32[], f32[3], f32[3]) parameter(0)
  j = s32[] get-tuple-element(p), index=0
  y = f32[3] get-tuple-element(p), index=1
  m = f32[3] get-tuple-element(p), index=2
  lm = f32[3] log-plus-one(m)
  ny = f32[3] add(y, lm)
  one = s32[] constant(1)
  nj = s32[] add(j, one)
  ROOT r = (s32[], f32[3], f32[3]) tuple(nj, ny, m)
}

body_o {
  p = (s32[], f32[3], f32[3]) parameter(0)
  k = s32[] get-tuple-element(p), index=0
  y = f32[3] get-tuple-element(p), index=1
  m = f32[3] get-tuple-element(p), index=2
  z = s32[] constant(0)
  inner0 = (s32[], f32[3], f32[3]) tuple(z, y, m)
  inner = (s32[], f32[3], f32[3]) while(inner0), condition=cond_i, body=body_i
  iy = f32[3] get-tuple-element(inner), index=1
  h = f32[3] tanh(iy)
  one = s32[] constant(1)
  nk = s32[] add(k, one)
  ROOT r = (s32[], f32[3], f32[3]) tuple(nk, h, m)
}

ENTRY main_n {
  y0 = f32[3] parameter(0)
  m0 = f32[3] parameter(1)
  z = s32[] constant(0)
  init = (s32[], f32[3], f32[3]) tuple(z, y0, m0)
  w = (s32[], f32[3], f32[3]) while(init), condition=cond_o, body=body_o
  ROOT o = f32[3] get-tuple-element(w), index=1
}
"""

# a one-element state; the condition reads the whole tuple through a call
SINGLE = """HloModule single

first {
  fp = (s32[]) parameter(0)
  ROOT fg = s32[] get-tuple-element(fp), index=0
}

cond_s {
  cp = (s32[]) parameter(0)
  cv = s32[] call(cp), to_apply=first
  cn = s32[] constant(100)
  ROOT clt = pred[] compare(cv, cn), direction=LT
}

body_s {
  bp = (s32[]) parameter(0)
  bv = s32[] get-tuple-element(bp), index=0
  b3 = s32[] constant(3)
  bm = s32[] multiply(bv, b3)
  b1 = s32[] constant(1)
  ba = s32[] add(bm, b1)
  ROOT bt = (s32[]) tuple(ba)
}

ENTRY main_s {
  x = s32[] parameter(0)
  init = (s32[]) tuple(x)
  w = (s32[]) while(init), condition=cond_s, body=body_s
  ROOT o = s32[] get-tuple-element(w), index=0
}
"""

CASES: dict[str, tuple[str, Callable[[], list[np.ndarray]]]] = {
    "invariant_dot": (INVARIANT_DOT, lambda: [rand(4), rand(4, 4, seed=1)]),
    "in_place_update_beside_an_invariant": (IN_PLACE, lambda: [rand(8), rand(2, seed=1)]),
    "hoisted_value_into_in_place_state": (HOISTED_INTO_STATE, lambda: [rand(4), rand(4, seed=1)]),
    "root_not_a_tuple": (BARRIER_ROOT, lambda: [rand(3)]),
    "nested_loops": (NESTED, lambda: [rand(3), rand(3, seed=1, low=0.1, high=1.0)]),
    "one_element_state": (SINGLE, lambda: [np.array(1, np.int32)]),
    "zero_iterations": (INVARIANT_DOT.replace("s32[] constant(10)", "s32[] constant(0)"),
                        lambda: [rand(4), rand(4, 4, seed=1)]),
}


def _compile(text: str) -> Any:
    return emulator.load_artifact(compile_module(hlo.load(text)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_loop_matches_xla_cpu(name: str) -> None:
    text, inputs = CASES[name]
    exe = _compile(text)
    ref = XlaCpuExecutable(hlo.load(text).to_bytes())
    for _ in range(2):  # hoisted values and loop state are fresh on every run
        args = inputs()
        assert_close(exe.run(args), ref.run(args), rtol=1e-5, atol=1e-6)


@contextmanager
def _counting(op: str) -> Iterator[list[int]]:
    """Counts executions of `op` in programs loaded inside the block."""
    spec = OPS[op]
    factory, calls = spec.handler, [0]

    def counted(ctx: Any) -> Callable[..., Any]:
        fn = factory(ctx)

        def run(*args: Any) -> Any:
            calls[0] += 1
            return fn(*args)
        return run
    spec.handler = counted
    try:
        yield calls
    finally:
        spec.handler = factory


def test_invariant_instructions_run_once_per_loop_not_per_iteration() -> None:
    with _counting("exponential") as exps, _counting("dot") as dots, _counting("tanh") as tanhs:
        exe = _compile(INVARIANT_DOT)
        exe.run([rand(4), rand(4, 4, seed=1)])
    assert exps == [1]  # exp(W): W passes through the body unchanged
    assert dots == [10] and tanhs == [10]  # they read x, which every iteration changes


def test_invariants_of_an_inner_loop_run_once_per_inner_loop() -> None:
    with _counting("log-plus-one") as logs:
        _compile(NESTED).run([rand(3), rand(3, seed=1, low=0.1, high=1.0)])
    assert logs == [4]  # once per outer iteration (the inner loop is entered 4 times), not 12


def test_the_in_place_case_really_updates_in_place() -> None:
    """HOISTED_INTO_STATE tests what it means to: its dynamic-update-slice writes into the state."""
    program = _compile(HOISTED_INTO_STATE)._loaded.program
    dus = [i for c in program.computations for i in c.instructions if i.op == "dynamic-update-slice"]
    assert [i.reuse for i in dus] == [0]


def test_a_profiled_run_counts_every_iteration() -> None:
    """A profile shows what the program asks for: one exponential per iteration."""
    exe = _compile(INVARIANT_DOT)
    _, prof = exe.profile([rand(4), rand(4, 4, seed=1)])
    assert sum(1 for e in prof.events if e.op == "exponential") == 10


def test_a_tuple_state_loop_that_never_ends_stops_with_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WHILE_TIMEOUT_ENV, "0.3")
    exe = _compile(INVARIANT_DOT.replace("direction=LT", "direction=NE").replace("s32[] constant(10)",
                                                                                 "s32[] constant(-1)"))
    with pytest.raises(emulator.EmulatorError, match=f"still running after .*{WHILE_TIMEOUT_ENV}"):
        exe.run([rand(4), rand(4, 4, seed=1)])


def test_a_failure_inside_a_fused_loop_names_its_instruction() -> None:
    exe = _compile(INVARIANT_DOT)

    def boom(ctx: Any) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            raise ValueError("broken handler")
        return run
    spec = OPS["tanh"]
    factory, spec.handler = spec.handler, boom
    try:
        exe = _compile(INVARIANT_DOT)
    finally:
        spec.handler = factory
    with pytest.raises(emulator.EmulatorError, match=r"body_a: instruction bh \(tanh\) failed: ValueError: broken"):
        exe.run([rand(4), rand(4, 4, seed=1)])
