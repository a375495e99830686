"""Computations written inline where an attribute takes one (`to_apply={ ... }`, `body=`,
`condition=`, `branch_computations={{...}, ...}`, `calls=`, `select=`/`scatter=`, async
shorthands' attributes), as jaxlib 0.10.2's parser reads them: a scope of their own, named `_`
(`_.1`, ... made unique with the others' names, innermost first), defined just before the
computation that holds them. Each text is read by XLA's parser and ours and the protos compared;
the runnable ones also run on XLA:CPU and on ours. XLA's call-inliner tests are written so (three
of its modules were refused by our reader before)."""
from __future__ import annotations

import numpy as np
import pytest

import hlo
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable
from tests.hlo.text.oracle import canonical_diff, xla_parse
from tests.neuron_customcall.compiler.ours import assert_close, compile_proto

REDUCES = """
HloModule reduces
ENTRY e {
  p = f32[3,4] parameter(0)
  z = f32[] constant(0)
  s = f32[3] reduce(p, z), dimensions={1}, to_apply={
    a = f32[] parameter(0)
    b = f32[] parameter(1)
    ROOT r = f32[] add(a, b)
  }
  m = f32[4] reduce(p, z), dimensions={0}, to_apply={ a = f32[] parameter(0)
    b = f32[] parameter(1)
    ROOT r = f32[] maximum(a, b) }
  ROOT t = (f32[3], f32[4]) tuple(s, m)
}
"""

WHILE = """
HloModule loop
ENTRY e {
  p = f32[4] parameter(0)
  i = s32[] constant(0)
  init = (s32[], f32[4]) tuple(i, p)
  w = (s32[], f32[4]) while(init), condition={
    s = (s32[], f32[4]) parameter(0)
    k = s32[] get-tuple-element(s), index=0
    n = s32[] constant(5)
    ROOT c = pred[] compare(k, n), direction=LT
  }, body={
    s = (s32[], f32[4]) parameter(0)
    k = s32[] get-tuple-element(s), index=0
    one = s32[] constant(1)
    k1 = s32[] add(k, one)
    v = f32[4] get-tuple-element(s), index=1
    v2 = f32[4] multiply(v, v)
    h = f32[] constant(0.5)
    hb = f32[4] broadcast(h), dimensions={}
    v3 = f32[4] multiply(v2, hb)
    ROOT r = (s32[], f32[4]) tuple(k1, v3)
  }
  ROOT out = f32[4] get-tuple-element(w), index=1
}
"""

BRANCHES = """
HloModule branches
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  k = s32[] parameter(0)
  p = f32[4] parameter(1)
  b = pred[] parameter(2)
  c = f32[4] conditional(k, p, p, p), branch_computations={{
    x = f32[4] parameter(0)
    ROOT n = f32[4] negate(x)
  }, {
    x = f32[4] parameter(0)
    ROOT e = f32[4] exponential(x)
  }, {
    x = f32[4] parameter(0)
    z = f32[] constant(0)
    r = f32[] reduce(x, z), dimensions={0}, to_apply=add
    ROOT b = f32[4] broadcast(r), dimensions={}
  }}
  d = f32[4] conditional(b, p, c), true_computation={
    x = f32[4] parameter(0)
    ROOT a = f32[4] abs(x)
  }, false_computation={
    x = f32[4] parameter(0)
    ROOT f = f32[4] floor(x)
  }
  ROOT t = (f32[4], f32[4]) tuple(c, d)
}
"""

NESTED = """
HloModule nested
ENTRY main {
  p = s32[3] parameter(0)
  q = s32[3] parameter(1)
  ROOT c = call(p, q), to_apply={
    a = s32[3] parameter(0)
    b = s32[3] parameter(1)
    ROOT c = call(a, b), to_apply={
      x = s32[3] parameter(0)
      y = s32[3] parameter(1)
      m = s32[3] multiply(x, y)
      ROOT s = s32[3] subtract(m, x)
    }
  }
}
"""

SORT_MAP_SCATTER = """
HloModule more
ENTRY e {
  p = f32[6] parameter(0)
  s = f32[6] sort(p), dimensions={0}, to_apply={
    a = f32[] parameter(0)
    b = f32[] parameter(1)
    ROOT lt = pred[] compare(a, b), direction=GT
  }
  m = f32[6] map(p, s), dimensions={0}, to_apply={
    a = f32[] parameter(0)
    b = f32[] parameter(1)
    ROOT r = f32[] subtract(a, b)
  }
  idx = s32[2,1] constant({{1}, {4}})
  upd = f32[2] constant({10, 20})
  sc = f32[6] scatter(m, idx, upd), update_window_dims={}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply={
    a = f32[] parameter(0)
    b = f32[] parameter(1)
    ROOT r = f32[] add(a, b)
  }
  z = f32[] constant(-inf)
  rw = f32[3] reduce-window(sc, z), window={size=2 stride=2}, to_apply={
    a = f32[] parameter(0)
    b = f32[] parameter(1)
    ROOT r = f32[] maximum(a, b)
  }
  ROOT t = (f32[6], f32[3]) tuple(s, rw)
}
"""

SELECT_AND_SCATTER = """
HloModule sas
ENTRY e {
  p = f32[4] parameter(0)
  src = f32[2] parameter(1)
  z = f32[] constant(0)
  ROOT r = f32[4] select-and-scatter(p, src, z), window={size=2 stride=2}, select={
    a = f32[] parameter(0)
    b = f32[] parameter(1)
    ROOT g = pred[] compare(a, b), direction=GE
  }, scatter={
    a = f32[] parameter(0)
    b = f32[] parameter(1)
    ROOT s = f32[] add(a, b)
  }
}
"""

# XLA's call-inliner test form: an async shorthand with its wrapped instruction's computation
# inline, beside named computations and a nested inline call
ASYNC_SHORTHAND = """
HloModule asyncs, is_scheduled=true
ENTRY main {
  a = s32[3] parameter(0)
  b = s32[3] parameter(1)
  call.0 = call(a, b), to_apply={
    x = s32[3] parameter(0)
    y = s32[3] parameter(1)
    start.0 = ((s32[3]), s32[3], s32[]) call-start(x), to_apply={
      arg.0 = s32[3] parameter(0)
      one.0 = s32[] constant(1)
      ob = s32[3] broadcast(one.0), dimensions={}
      ROOT add.0 = add(arg.0, ob)
    }, async_execution_thread="thread"
    add.0 = add(x, y)
    done.0 = s32[3] call-done(start.0)
    ROOT add.1 = add(done.0, add.0)
  }
  start.1 = ((s32[3]), s32[3], s32[]) call-start(call.0), to_apply={
    arg.0 = s32[3] parameter(0)
    ROOT neg.0 = negate(arg.0)
  }
  ROOT done.1 = s32[3] call-done(start.1)
}
"""

ASYNC_EXPLICIT = """
HloModule t
wrapped {
  x = f32[2] parameter(0)
  ROOT n = f32[2] negate(x)
}
other {
  x = f32[2] parameter(0)
  ROOT n = f32[2] abs(x)
}
ENTRY e {
  p = f32[2] parameter(0)
  s = ((f32[2]), f32[2], s32[]) async-start(p), calls=wrapped, async_execution_thread="th"
  u = ((f32[2]), f32[2], s32[]) async-update(s)
  ROOT d = f32[2] async-done(u), calls=wrapped, async_execution_thread="th"
}
"""

PARSE_ONLY = {
    # calls= and the thread on an async-done are checked against the start's, not stored; the
    # start's thread is its wrapped computation's
    "async_explicit": ASYNC_EXPLICIT,
    "fusion_calls": """
HloModule f
ENTRY e {
  p = f32[4] parameter(0)
  ROOT f = f32[4] fusion(p), kind=kLoop, calls={
    x = f32[4] parameter(0)
    ROOT n = f32[4] negate(x)
  }
}
""",
    "all_reduce": """
HloModule ar
ENTRY e {
  p = f32[4] parameter(0)
  ROOT r = f32[4] all-reduce(p), replica_groups={}, to_apply={
    a = f32[] parameter(0)
    b = f32[] parameter(1)
    ROOT s = f32[] add(a, b)
  }
}
""",
    "custom_call_called_computations": """
HloModule cc
ENTRY e {
  p = f32[4] parameter(0)
  ROOT r = f32[4] custom-call(p), custom_call_target="foo", called_computations={{
    x = f32[4] parameter(0)
    ROOT n = f32[4] negate(x)
  }, {
    x = f32[4] parameter(0)
    ROOT a = f32[4] abs(x)
  }}
}
""",
    "inline_calls_named": """
HloModule named
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT c = f32[] call(p, z), to_apply={
    x = f32[4] parameter(0)
    i = f32[] parameter(1)
    ROOT r = f32[] reduce(x, i), dimensions={0}, to_apply=add
  }
}
""",
    "name_taken": """
HloModule taken
_ {
  x = f32[] parameter(0)
  ROOT n = f32[] negate(x)
}
ENTRY e {
  p = f32[] parameter(0)
  a = f32[] call(p), to_apply=_
  ROOT b = f32[] call(a), to_apply={
    x = f32[] parameter(0)
    ROOT e = f32[] exponential(x)
  }
}
""",
}

RUNNABLE = {"reduces": REDUCES, "while": WHILE, "branches": BRANCHES, "nested": NESTED,
            "sort_map_scatter": SORT_MAP_SCATTER, "select_and_scatter": SELECT_AND_SCATTER,
            "async_shorthand": ASYNC_SHORTHAND}


def _inputs(module: hlo.HloModule) -> list[np.ndarray]:
    rng = np.random.default_rng(15)
    out = []
    for p in module.entry.parameters:
        shape, dtype = tuple(p.shape.dimensions), p.shape.dtype
        if dtype == np.bool_:
            out.append(np.array(True))
        elif np.issubdtype(dtype, np.integer):
            out.append(rng.integers(0, 3, shape).astype(dtype))
        else:
            out.append(rng.normal(size=shape).astype(dtype))
    return out


@pytest.mark.parametrize("name", sorted(RUNNABLE) + sorted(PARSE_ONLY))
def test_inline_computations_read_as_xla_reads_them(name):
    text = RUNNABLE.get(name) or PARSE_ONLY[name]
    ours = hlo.load(text)
    diff = canonical_diff(ours.to_proto(), xla_parse(text))
    assert not diff, diff
    # and what we print (computations named `_`, `_.1`, ...) reads back as the same module
    again = hlo.load(ours.to_text())
    assert not canonical_diff(again.to_proto(), ours.to_proto())


@pytest.mark.parametrize("name", sorted(set(RUNNABLE) - {"async_shorthand"}))
def test_inline_computations_run_as_on_xla_cpu(name):
    text = RUNNABLE[name]
    module = hlo.load(text)
    inputs = _inputs(module)
    ours = compile_proto(module.to_bytes()).run(inputs)
    ref = XlaCpuExecutable(xla_parse(text).SerializeToString()).run(inputs)
    assert_close(ours, ref)


def test_inline_names_are_made_unique_innermost_first():
    module = hlo.load(NESTED)
    # XLA adds the inner computation to the module first: it is `_`, its caller `_.1`
    assert [c.name for c in module.computations] == ["_", "_.1", "main"]
    assert module.entry.root.called_computations[0].name == "_.1"


def test_an_inline_computation_has_its_own_scope():
    text = """
HloModule scope
ENTRY e {
  p = f32[4] parameter(0)
  ROOT c = f32[4] call(p), to_apply={
    x = f32[4] parameter(0)
    ROOT s = f32[4] add(x, p)
  }
}
"""
    with pytest.raises(hlo.HloParseError, match="operand 'p' is not defined in computation '_'"):
        hlo.load(text)


def test_an_inline_computation_cannot_call_its_caller():
    text = """
HloModule rec
ENTRY e {
  p = f32[] parameter(0)
  ROOT c = f32[] call(p), to_apply={
    x = f32[] parameter(0)
    ROOT r = f32[] call(x), to_apply=e
  }
}
"""
    with pytest.raises(hlo.HloParseError, match="computation 'e' is used before it is defined"):
        hlo.load(text)


def test_inline_computation_where_none_is_taken_is_an_error():
    with pytest.raises(hlo.HloParseError):
        hlo.load("HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT n = f32[] negate(p), metadata={ x = f32[] parameter(0) }\n}\n")


@pytest.mark.parametrize("edit, match", [
    ('async-done(u), calls=wrapped', "names computation 'other', its async-start 's' wraps another"),
    ('async_execution_thread="th"\n}', "names thread 'main', its async-start 's' runs on 'th'"),
], ids=["calls", "thread"])
def test_an_async_done_must_agree_with_its_start(edit, match):
    wrong = edit.replace("calls=wrapped", "calls=other").replace('"th"', '"main"')
    text = ASYNC_EXPLICIT.replace(edit, wrong)
    assert text != ASYNC_EXPLICIT
    with pytest.raises(hlo.HloParseError, match=match):
        hlo.load(text)
