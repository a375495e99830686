"""XLA's asynchronous pairs (async-start/update/done, the `call-start`/`negate-start` shorthands,
copy-start/copy-done) run with XLA's meaning: the done's value is the wrapped computation applied
to the start's operands. XLA:CPU cannot take these modules through jaxlib's HLO -> StableHLO path
(it aborts on them), so the reference is XLA:CPU running the same module written synchronously
(each pair as the `call` or `copy` it stands for): XLA defines the pair by that equivalence.
Not a test_diff_* file: the through-plugin run hands modules to jaxlib, which aborts on these.
"""
from __future__ import annotations

import numpy as np
import pytest

import hlo
from emulator import load_artifact
from neuron_customcall.compiler import CompileError, compile_module
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable
from tests.hlo.text.oracle import xla_parse
from tests.neuron_customcall.compiler.ours import assert_close, rand

WRAPPED = """
wrapped {
  x = f32[2,3] parameter(0)
  z = f32[] parameter(1)
  ROOT r = f32[2] reduce(x, z), dimensions={1}, to_apply={
    a = f32[] parameter(0)
    b = f32[] parameter(1)
    ROOT s = f32[] add(a, b)
  }
}
"""
EXPLICIT = "HloModule explicit\n" + WRAPPED + """ENTRY e {
  p = f32[2,3] parameter(0)
  z = f32[] constant(0)
  s = ((f32[2,3], f32[]), f32[2], s32[]) async-start(p, z), calls=wrapped, async_execution_thread="side"
  u = ((f32[2,3], f32[]), f32[2], s32[]) async-update(s), calls=wrapped
  ops = (f32[2,3], f32[]) get-tuple-element(u), index=0
  again = f32[2,3] get-tuple-element(ops), index=0
  other = f32[2,3] exponential(p)
  d = f32[2] async-done(u), calls=wrapped, async_execution_thread="side"
  cs = (f32[2,3], f32[2,3], u32[]) copy-start(again)
  cd = f32[2,3] copy-done(cs)
  m = f32[2,3] multiply(cd, other)
  ROOT t = (f32[2], f32[2,3]) tuple(d, m)
}
"""
EXPLICIT_SYNC = "HloModule explicit_sync\n" + WRAPPED + """ENTRY e {
  p = f32[2,3] parameter(0)
  z = f32[] constant(0)
  d = f32[2] call(p, z), to_apply=wrapped
  other = f32[2,3] exponential(p)
  cd = f32[2,3] copy(p)
  m = f32[2,3] multiply(cd, other)
  ROOT t = (f32[2], f32[2,3]) tuple(d, m)
}
"""

# the shape of XLA's call-inliner tests (call-start inside inline computations), flat parameters
SHORTHAND = """
HloModule shorthand, is_scheduled=true
ENTRY main {
  a = s32[3] parameter(0)
  b = s32[3] parameter(1)
  c0 = (s32[3], s32[3]) call(a, b), to_apply={
    x = s32[3] parameter(0)
    y = s32[3] parameter(1)
    start.0 = ((s32[3]), s32[3], s32[]) call-start(x), to_apply={
      arg.0 = s32[3] parameter(0)
      one.0 = s32[] constant(1)
      ob = s32[3] broadcast(one.0), dimensions={}
      ROOT add.0 = add(arg.0, ob)
    }, async_execution_thread="thread"
    add.0 = add(y, y)
    done.0 = s32[3] call-done(start.0)
    ROOT t = tuple(done.0, add.0)
  }
  g0 = s32[3] get-tuple-element(c0), index=0
  g1 = s32[3] get-tuple-element(c0), index=1
  n-start = ((s32[3]), s32[3], s32[]) negate-start(g1)
  n-done = s32[3] negate-done(n-start)
  ROOT r = (s32[3], s32[3]) tuple(g0, n-done)
}
"""
SHORTHAND_SYNC = """
HloModule shorthand_sync
ENTRY main {
  a = s32[3] parameter(0)
  b = s32[3] parameter(1)
  c0 = (s32[3], s32[3]) call(a, b), to_apply={
    x = s32[3] parameter(0)
    y = s32[3] parameter(1)
    done.0 = s32[3] call(x), to_apply={
      arg.0 = s32[3] parameter(0)
      one.0 = s32[] constant(1)
      ob = s32[3] broadcast(one.0), dimensions={}
      ROOT add.0 = add(arg.0, ob)
    }
    add.0 = add(y, y)
    ROOT t = tuple(done.0, add.0)
  }
  g0 = s32[3] get-tuple-element(c0), index=0
  g1 = s32[3] get-tuple-element(c0), index=1
  n-done = s32[3] negate(g1)
  ROOT r = (s32[3], s32[3]) tuple(g0, n-done)
}
"""

# XLA's call_inliner_test_1: computations on another execution thread, an async call of one with
# no operands (XLA:CPU refuses the module through jaxlib: "Expected array argument ... (u32[])")
THREADS = """
HloModule inline_specified_threads_only
%secondary_inner () -> u32[] {
  ROOT %co.2 = u32[] constant(2)
}, execution_thread="secondary_thread"
%secondary_outer () -> u32[] {
  %co.1 = u32[] constant(1)
  %call.1 = u32[] call(), to_apply=%secondary_inner
  ROOT %add.1 = add(%co.1, %call.1)
}, execution_thread="secondary_thread"
%main_inner () -> u32[] {
  %co.0 = u32[] constant(0)
  %async-start = ((), u32[], u32[]) call-start(), async_execution_thread="secondary_thread", to_apply=secondary_outer
  %async-done = u32[] call-done(((), u32[], u32[]) %async-start)
  ROOT %add.2 = add(%co.0, %async-done)
}
ENTRY %main_outer (p0: u32[]) -> u32[] {
  %p.0 = u32[] parameter(0)
  %call.0 = u32[] call(), to_apply=%main_inner
  ROOT %add.3 = add(%p.0, %call.0)
}
"""
THREADS_SYNC = (THREADS.replace('  %async-start = ((), u32[], u32[]) call-start(), async_execution_thread="secondary_thread", '
                                'to_apply=secondary_outer\n', "")
                .replace("call-done(((), u32[], u32[]) %async-start)", "call(), to_apply=secondary_outer")
                .replace(', execution_thread="secondary_thread"', ""))


def _ours(text: str, inputs: list) -> list:
    return load_artifact(compile_module(hlo.load(text))).run(inputs)


def _xla(text: str, inputs: list) -> list:
    return XlaCpuExecutable(xla_parse(text).SerializeToString()).run(inputs)


@pytest.mark.parametrize("asynchronous, synchronous, inputs", [
    (EXPLICIT, EXPLICIT_SYNC, [rand(2, 3)]),
    (SHORTHAND, SHORTHAND_SYNC, [np.array([3, -4, 5], np.int32), np.array([7, 0, -2], np.int32)]),
    (THREADS, THREADS_SYNC, [np.uint32(10)]),
], ids=["explicit", "shorthand", "threads"])
def test_async_pairs_have_the_value_of_the_synchronous_module_on_xla_cpu(asynchronous, synchronous, inputs):
    assert_close(_ours(asynchronous, inputs), _xla(synchronous, inputs))


def test_xla_call_inliner_modules_with_tuple_parameters():
    """XLA's call_inliner_test modules as written (a tuple entry parameter, which the corpus harness
    cannot hand XLA:CPU): (a, b) -> (a + 2, b + 2) through two inline calls of call-start pairs."""
    one_call = """
  ROOT call.1 = call(arg.0), to_apply={
    arg.0 = (s32[], s32[]) parameter(0)
    gte.0 = get-tuple-element(arg.0), index=0
    call-start.0 = ((s32[]), s32[], s32[]) call-start(gte.0), to_apply={
      arg.0 = s32[] parameter(0)
      one.0 = s32[] constant(1)
      ROOT add.0 = add(arg.0, one.0)
    }, async_execution_thread="thread"
    gte.1 = get-tuple-element(arg.0), index=1
    one.0 = s32[] constant(1)
    add.0 = add(gte.1, one.0)
    call-done.0 = s32[] call-done(call-start.0)
    ROOT tuple.0 = tuple(call-done.0, add.0)
  }"""
    text = ("HloModule main, is_scheduled=true\nENTRY main {\n  arg.0 = (s32[], s32[]) parameter(0)\n"
            + one_call.replace("ROOT call.1 = call(arg.0)", "call.0 = call(arg.0)")
            + one_call.replace("call(arg.0), to_apply={\n    arg.0 = (s32[], s32[])",
                               "call(call.0), to_apply={\n    arg.0 = (s32[], s32[])", 1) + "\n}\n")
    out = _ours(text, [np.int32(5), np.int32(-7)])
    assert [int(o) for o in out] == [7, -5]


@pytest.mark.parametrize("use, match", [
    ("ROOT c = s32[] get-tuple-element(s), index=2", "reads element 2 of async-start s: its context"),
    ("ROOT c = ((f32[2]), f32[2], s32[]) copy(s)", "uses the value of async-start s whole"),
    ("ROOT c = ((f32[2]), f32[2], s32[]) async-update(s)", "returns the value of async-update c whole"),
])
def test_what_an_async_pair_does_not_define_is_refused_by_name(use, match):
    text = f"""
HloModule refused
w {{
  x = f32[2] parameter(0)
  ROOT n = f32[2] negate(x)
}}
ENTRY e {{
  p = f32[2] parameter(0)
  s = ((f32[2]), f32[2], s32[]) async-start(p), calls=w
  {use}
}}
"""
    with pytest.raises(CompileError, match=match):
        compile_module(hlo.load(text))


def test_a_module_without_async_pairs_is_not_copied():
    from neuron_customcall.compiler.async_pairs import run_async_pairs_synchronously

    module = hlo.load(EXPLICIT_SYNC)
    assert run_async_pairs_synchronously(module) is module
    rewritten = hlo.load(EXPLICIT)
    assert run_async_pairs_synchronously(rewritten) is not rewritten
    assert any(i.opcode == "async-start" for i in rewritten.instructions())  # the caller's module is kept
