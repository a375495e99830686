"""The in-place collective-permute (input, output, input start indices, output start indices,
slice_sizes), and its -start/-done form, against a NumPy reference written from XLA's
semantics. XLA:CPU through jaxlib can not run this form (its StableHLO route requires a single
operand), so NumPy is the oracle. Modules follow XLA's own parser tests
(CollectivePermuteInPlaceUpdate, ...MultipleReadWrite, ...TupleMultipleReadWrite)."""
from __future__ import annotations

import numpy as np
import pytest

import hlo
from emulator.collectives import CollectiveError, run_devices
from emulator.errors import EmulatorError
from neuron_customcall.compiler import CompileError
from tests.neuron_customcall.compiler.ours import compile_proto

ONE_GROUP = """HloModule m, replica_count=4
ENTRY e {
  input = f32[8,4] parameter(0)
  fill = f32[] constant(-1)
  output = f32[8,8] broadcast(fill), dimensions={}
  c0 = s32[] constant(0)
  c2 = s32[] constant(2)
  c4 = s32[] constant(4)
  ins = (s32[], s32[]) tuple(c2, c0)
  outs = (s32[], s32[]) tuple(c0, c4)
  ROOT r = f32[8,8] collective-permute(input, output, ins, outs), source_target_pairs={{0,1},{1,2},{2,3}},
    slice_sizes={{4,4}}
}"""

#: two groups of pairs (a forward and a backward exchange), one start index each
TWO_GROUPS = """HloModule m, replica_count=4
ENTRY e {
  input = f32[8,4] parameter(0)
  fill = f32[] constant(-1)
  output = f32[8,4] broadcast(fill), dimensions={}
  c0 = s32[] constant(0)
  c1 = s32[] constant(1)
  c5 = s32[] constant(5)
  c6 = s32[] constant(6)
  i1 = (s32[], s32[]) tuple(c0, c0)
  i2 = (s32[], s32[]) tuple(c1, c0)
  o1 = (s32[], s32[]) tuple(c5, c0)
  o2 = (s32[], s32[]) tuple(c6, c0)
  io = ((s32[], s32[]), (s32[], s32[])) tuple(i1, i2)
  oo = ((s32[], s32[]), (s32[], s32[])) tuple(o1, o2)
  ROOT r = f32[8,4] collective-permute(input, output, io, oo),
    source_target_pairs={{0,1},{1,2},{2,3},{0,3},{2,1},{3,2}}, slice_sizes={{1,4},{2,4}}
}"""

#: start indices from replica-id: each device reads and writes at its own offsets; a ring
DYNAMIC = """HloModule m, replica_count=4
ENTRY e {
  input = f32[8,4] parameter(0)
  fill = f32[] constant(-1)
  output = f32[8,4] broadcast(fill), dimensions={}
  c0 = s32[] constant(0)
  r = u32[] replica-id()
  rs = s32[] convert(r)
  ins = (s32[], s32[]) tuple(rs, c0)
  c2 = s32[] constant(2)
  r2 = s32[] multiply(rs, c2)
  outs = (s32[], s32[]) tuple(r2, c0)
  ROOT res = f32[8,4] collective-permute(input, output, ins, outs), source_target_pairs={{0,1},{1,2},{2,3},{3,0}},
    slice_sizes={{2,4}}
}"""

#: a tuple of two inputs of different shapes, two groups each (XLA's TupleMultipleReadWrite shape)
TUPLE = """HloModule m, replica_count=4
ENTRY e {
  a = f32[8,4] parameter(0)
  b = f32[8,4] negate(a)
  a2 = f32[2,8,4] broadcast(a), dimensions={1,2}
  fill = f32[] constant(1000)
  oa = f32[8,4] broadcast(fill), dimensions={}
  ob = f32[4,8,4] broadcast(fill), dimensions={}
  inputs = (f32[8,4], f32[2,8,4]) tuple(b, a2)
  outputs = (f32[8,4], f32[4,8,4]) tuple(oa, ob)
  c0 = s32[] constant(0)
  c1 = s32[] constant(1)
  c2 = s32[] constant(2)
  z2 = (s32[], s32[]) tuple(c0, c0)
  one2 = (s32[], s32[]) tuple(c1, c0)
  z3 = (s32[], s32[], s32[]) tuple(c0, c0, c0)
  one3 = (s32[], s32[], s32[]) tuple(c1, c0, c0)
  two3 = (s32[], s32[], s32[]) tuple(c2, c0, c0)
  in_a = ((s32[], s32[]), (s32[], s32[])) tuple(z2, one2)
  in_b = ((s32[], s32[], s32[]), (s32[], s32[], s32[])) tuple(one3, z3)
  out_a = ((s32[], s32[]), (s32[], s32[])) tuple(one2, z2)
  out_b = ((s32[], s32[], s32[]), (s32[], s32[], s32[])) tuple(z3, two3)
  ins = (((s32[], s32[]), (s32[], s32[])), ((s32[], s32[], s32[]), (s32[], s32[], s32[]))) tuple(in_a, in_b)
  outs = (((s32[], s32[]), (s32[], s32[])), ((s32[], s32[], s32[]), (s32[], s32[], s32[]))) tuple(out_a, out_b)
  ROOT r = (f32[8,4], f32[4,8,4]) collective-permute(inputs, outputs, ins, outs),
    source_target_pairs={{0,1},{1,2},{2,3},{3,0},{0,3},{3,2},{2,1},{1,0}},
    slice_sizes={{1,4},{1,4},{1,8,4},{2,8,4}}
}"""

ASYNC = """HloModule m, replica_count=4
ENTRY e {
  input = f32[8,4] parameter(0)
  fill = f32[] constant(-1)
  output = f32[8,8] broadcast(fill), dimensions={}
  c0 = s32[] constant(0)
  c2 = s32[] constant(2)
  c4 = s32[] constant(4)
  ins = (s32[], s32[]) tuple(c2, c0)
  outs = (s32[], s32[]) tuple(c0, c4)
  s = (f32[8,4], f32[8,8], u32[], u32[]) collective-permute-start(input, output, ins, outs),
    source_target_pairs={{0,1},{1,2},{2,3}}, slice_sizes={{4,4}}
  ROOT d = f32[8,8] collective-permute-done(s)
}"""


def _reference(xs, out_like, groups, slices, in_starts, out_starts):
    """NumPy: per leaf e and group k, target t's output at out_starts(t)[e][k] gets source s's
    input at in_starts(s)[e][k], of slices[e][k]; the rest of t's output as given."""
    n = len(xs)
    outs = [[np.array(o, copy=True) for o in out_like(d)] for d in range(n)]
    for e in range(len(slices)):
        for k, pairs in enumerate(groups):
            size = slices[e][k]
            for s, t in pairs:
                src = tuple(slice(a, a + z) for a, z in zip(in_starts(s, e, k), size))
                dst = tuple(slice(a, a + z) for a, z in zip(out_starts(t, e, k), size))
                outs[t][e][dst] = xs[s][e][src]
    return outs


def _run(text: str):
    xs = [[(np.arange(32, dtype=np.float32).reshape(8, 4) + 100 * d)] for d in range(4)]
    return xs, run_devices(compile_proto(hlo.load(text).to_bytes()), xs, 4, 1, timeout_s=60)


@pytest.mark.parametrize("text", [ONE_GROUP, ASYNC], ids=["sync", "start-done"])
def test_one_group(text):
    xs, ours = _run(text)
    want = _reference([[x[0]] for x in xs], lambda d: [np.full((8, 8), -1, np.float32)],
                      [[(0, 1), (1, 2), (2, 3)]], [[(4, 4)]],
                      lambda d, e, k: (2, 0), lambda d, e, k: (0, 4))
    for got, w in zip(ours, want):
        np.testing.assert_array_equal(got[0], w[0])
    np.testing.assert_array_equal(ours[0][0], np.full((8, 8), -1, np.float32))  # no pair targets device 0


def test_two_groups_of_pairs():
    xs, ours = _run(TWO_GROUPS)
    want = _reference([[x[0]] for x in xs], lambda d: [np.full((8, 4), -1, np.float32)],
                      [[(0, 1), (1, 2), (2, 3)], [(0, 3), (2, 1), (3, 2)]], [[(1, 4), (2, 4)]],
                      lambda d, e, k: (k, 0), lambda d, e, k: (5 + k, 0))
    for got, w in zip(ours, want):
        np.testing.assert_array_equal(got[0], w[0])


def test_start_indices_are_each_devices_own():
    xs, ours = _run(DYNAMIC)
    want = _reference([[x[0]] for x in xs], lambda d: [np.full((8, 4), -1, np.float32)],
                      [[(0, 1), (1, 2), (2, 3), (3, 0)]], [[(2, 4)]],
                      lambda d, e, k: (d, 0), lambda d, e, k: (2 * d, 0))
    for got, w in zip(ours, want):
        np.testing.assert_array_equal(got[0], w[0])


def test_tuple_inputs_two_groups():
    xs, ours = _run(TUPLE)
    leaves = [[-x[0], np.broadcast_to(x[0], (2, 8, 4))] for x in xs]
    fill = lambda d: [np.full((8, 4), 1000, np.float32), np.full((4, 8, 4), 1000, np.float32)]  # noqa: E731
    ins = {0: [(0, 0), (1, 0)], 1: [(1, 0, 0), (0, 0, 0)]}
    outs = {0: [(1, 0), (0, 0)], 1: [(0, 0, 0), (2, 0, 0)]}
    want = _reference(leaves, fill, [[(0, 1), (1, 2), (2, 3), (3, 0)], [(0, 3), (3, 2), (2, 1), (1, 0)]],
                      [[(1, 4), (1, 4)], [(1, 8, 4), (2, 8, 4)]],
                      lambda d, e, k: ins[e][k], lambda d, e, k: outs[e][k])
    for got, w in zip(ours, want):
        assert len(got) == 2
        for a, b in zip(got, w):
            np.testing.assert_array_equal(a, b)


def test_text_round_trip_keeps_slice_sizes():
    for text in (ONE_GROUP, TWO_GROUPS, TUPLE, ASYNC):
        module = hlo.load(text)
        assert hlo.load(module.to_text()).to_bytes() == module.to_bytes()


def test_a_slice_outside_the_input_is_an_error():
    bad = DYNAMIC.replace("c2 = s32[] constant(2)", "c2 = s32[] constant(3)")  # device 3 writes at row 9
    with pytest.raises((CollectiveError, EmulatorError), match="outside its"):
        _run(bad)


@pytest.mark.parametrize("change, message", [
    ("slice_sizes={{1,4},{2,4}}", "do not split into"),       # 6 pairs, 2 groups: fine; 3 lists below
    ("slice_sizes={{1,4},{2,4},{1,4},{1,4}}", "do not split into"),
    ("slice_sizes={{1,9},{2,4}}", "does not fit"),
])
def test_malformed_slices_are_compile_errors(change, message):
    text = TWO_GROUPS.replace("slice_sizes={{1,4},{2,4}}", change)
    if change == "slice_sizes={{1,4},{2,4}}":
        text = text.replace("{{0,1},{1,2},{2,3},{0,3},{2,1},{3,2}}", "{{0,1},{1,2},{2,3},{0,3},{2,1}}")
    with pytest.raises(CompileError, match=message):
        compile_proto(hlo.load(text).to_bytes())
