"""Finding fused regions while a runner is generated (no compiler needed): which instructions a
region takes, where it is closed, and that the generated code reads the right values however the
program reuses its slots. Every fused runner here gets its regions' NumPy form as the "native"
function, so these tests check the planning and the generated names, not C code."""
from __future__ import annotations

import numpy as np
import pytest

import emulator.ops  # noqa: F401 - registers the handlers
from emulator.codegen import make_runner
from emulator.executor import LoadedProgram
from emulator.native import policy
from emulator.native.regions import Region
from emulator.program import Computation, Instruction, Program

F = ["f32", [4, 3]]
ROW = ["f32", [3]]
P = ["pred", [4, 3]]
S = ["f32", []]


def _fused(comp: Computation, constants=()):
    """(plain runner, fused runner, regions) of `comp`, the regions run by their NumPy form."""
    loaded = LoadedProgram(Program([comp], 0), list(constants), [])
    plain = loaded.runner(0)
    steps, names, contexts = loaded._plain_steps[0]
    found: list[Region] = []

    def native(regions):
        found.extend(regions)
        # a native function's signature: (fallback, *inputs); here it runs the NumPy form
        return [lambda fallback, *inputs, numpy=r.fallback(): numpy(*inputs) for r in regions]
    fused = make_runner(comp, steps, names, in_types=[c.in_types for c in contexts], native=native)
    return plain, fused, found


def _same(a, b):
    for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape
        assert np.array_equal(x, y, equal_nan=True)


def _inputs(*types, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(t[1]).astype(np.float32) for t in types]


def test_a_chain_with_a_broadcast_row_is_one_region_closed_before_a_transcendental():
    comp = Computation("main", 8, [0, 1], [F, ROW], [
        Instruction("broadcast", 2, [1], F, {"dims": [1]}, free=[1], name="b"),
        Instruction("add", 3, [0, 2], F, free=[2], name="a"),
        Instruction("multiply", 4, [3, 0], F, free=[0], name="m"),
        Instruction("exponential", 5, [4], F, name="e"),            # not fusible: closes the region
        Instruction("subtract", 6, [5, 3], F, free=[3, 5], name="s"),  # a new region
        Instruction("tuple", 7, [4, 6], ["tuple", [F, F]], free=[4, 6], name="t"),
    ], 7, ["tuple", [F, F]])
    plain, fused, regions = _fused(comp)
    assert [[n.op for n in r.nodes] for r in regions] == [["broadcast", "add", "multiply"], ["subtract"]]
    assert [len(r.outputs) for r in regions] == [2, 1]  # a and m are read outside the first region
    args = _inputs(F, ROW)
    _same(plain(*args), fused(*args))


def test_a_region_closes_before_an_instruction_overwrites_its_input_in_place():
    """`e` writes its result into x's buffer (in place) after the region's `a` read x: the
    region must run before it, or `a` would add e's values."""
    comp = Computation("main", 6, [0, 1], [F, F], [
        Instruction("add", 2, [0, 1], F, free=[1], name="a"),
        Instruction("exponential", 3, [0], F, free=[0], reuse=0, name="e"),  # not fusible, in place
        Instruction("multiply", 4, [2, 3], F, free=[2, 3], name="m"),
    ], 4, F)
    plain, fused, regions = _fused(comp)
    assert [[n.op for n in r.nodes] for r in regions] == [["add"], ["multiply"]]
    args = _inputs(F, F)
    _same(plain(*[a.copy() for a in args]), fused(*[a.copy() for a in args]))


def test_a_region_closes_before_a_non_member_writes_the_register_of_its_input():
    """Slot 1 holds y, read by the region's `a`, freed there, then rewritten by `e` (not
    fusible) before the region's end: the call must read y, not e's value."""
    comp = Computation("main", 6, [0, 1], [F, F], [
        Instruction("add", 2, [0, 1], F, free=[1], name="a"),
        Instruction("exponential", 1, [0], F, name="e"),            # writes slot 1 (y is dead)
        Instruction("multiply", 3, [2, 0], F, free=[0, 2], name="m"),
        Instruction("tuple", 4, [1, 3], ["tuple", [F, F]], free=[1, 3], name="t"),
    ], 4, ["tuple", [F, F]])
    plain, fused, regions = _fused(comp)
    assert len(regions) == 2
    args = _inputs(F, F)
    _same(plain(*args), fused(*args))


def test_a_region_writing_the_slot_of_an_input_it_frees_keeps_its_output():
    """`a` frees y (slot 1) and `m`'s result takes slot 1: the free of y, deferred to after the
    call, must not clear the output."""
    comp = Computation("main", 4, [0, 1], [F, F], [
        Instruction("add", 2, [0, 1], F, free=[1], name="a"),
        Instruction("multiply", 1, [2, 0], F, free=[0, 2], name="m"),
        Instruction("exponential", 3, [1], F, free=[1], name="e"),
    ], 3, F)
    plain, fused, regions = _fused(comp)
    assert [[n.op for n in r.nodes] for r in regions] == [["add", "multiply"]]
    args = _inputs(F, F)
    _same(plain(*[a.copy() for a in args]), fused(*args))


def test_constants_whose_elements_agree_become_literals_and_scalars_stay_numpy():
    comp = Computation("main", 6, [0, 1], [F, S], [
        Instruction("constant", 2, [], S, {"index": 0}, name="c"),
        Instruction("broadcast", 3, [2], F, {"dims": []}, free=[2], name="bc"),   # folded: all 0.5
        Instruction("multiply", 4, [0, 3], F, free=[0, 3], name="m"),
        Instruction("multiply", 5, [1, 1], S, free=[1], name="scalar"),          # shape (): NumPy
        Instruction("tuple", 2, [4, 5], ["tuple", [F, S]], free=[4, 5], name="t"),
    ], 2, ["tuple", [F, S]])
    plain, fused, regions = _fused(comp, [np.array(0.5, np.float32)])
    (region,) = regions
    assert [n.op for n in region.nodes] == ["multiply"]
    assert [leaf.literal for leaf in region.leaves] == [None, np.float32(0.5)]
    args = [_inputs(F)[0], np.float32(3)]
    _same(plain(*args), fused(*args))


def test_ops_and_types_without_an_exact_c_expression_are_not_fused():
    i32 = ["s32", [4, 3]]
    comp = Computation("main", 6, [0, 1], [i32, i32], [
        Instruction("divide", 2, [0, 1], i32, name="intdiv"),       # XLA's integer division: NumPy
        Instruction("compare", 3, [0, 1], ["pred", [4, 3]], {"direction": "LT", "total_order": True},
                    free=[0, 1], name="totalorder"),                 # total order: NumPy
        Instruction("tuple", 4, [2, 3], ["tuple", [i32, P]], free=[2, 3], name="t"),
    ], 4, ["tuple", [i32, P]])
    _, _, regions = _fused(comp)
    assert regions == []


def test_policy_modes(monkeypatch):
    monkeypatch.delenv(policy.MODE_ENV, raising=False)
    monkeypatch.delenv(policy.AFTER_ENV, raising=False)
    assert policy.runs_before_build() == policy.DEFAULT_AFTER
    monkeypatch.setenv(policy.AFTER_ENV, "7")
    assert policy.runs_before_build() == 7
    monkeypatch.setenv(policy.MODE_ENV, "now")
    assert policy.runs_before_build() == 0
    monkeypatch.setenv(policy.MODE_ENV, "off")
    assert policy.runs_before_build() is None
    monkeypatch.setenv(policy.MODE_ENV, "sometimes")
    assert policy.mode() == "auto"


def test_a_broadcast_of_a_regions_row_starts_the_next_region_and_a_transpose_is_a_read():
    t = ["f32", [3, 4]]
    comp = Computation("main", 8, [0, 1, 2], [ROW, ROW, F], [
        Instruction("compare", 3, [0, 1], ["pred", [3]], {"direction": "GT", "total_order": False}, name="c"),
        Instruction("broadcast", 4, [3], P, {"dims": [1]}, free=[3], name="b"),  # reads the row region's value
        Instruction("transpose", 5, [2], F, {"perm": [0, 1]}, name="same"),
        Instruction("select", 6, [4, 2, 5], F, free=[4, 5], name="s"),
        Instruction("transpose", 7, [6], t, {"perm": [1, 0]}, free=[6], name="tr"),  # ends the region, starts one
        Instruction("negate", 3, [7], t, free=[7], name="n"),
    ], 3, t)
    plain, fused, regions = _fused(comp)
    assert [[n.op for n in r.nodes] for r in regions] == [["compare"], ["broadcast", "transpose", "select"],
                                                            ["transpose", "negate"]]
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32),
            rng.standard_normal((4, 3)).astype(np.float32)]
    _same(plain(*args), fused(*args))


def test_large_arrays_stay_numpy():
    big = ["f32", [512, 256]]
    comp = Computation("main", 3, [0, 1], [big, big], [Instruction("add", 2, [0, 1], big, name="a")], 2, big)
    _, _, regions = _fused(comp)
    assert regions == []


def test_an_output_that_only_reindexes_an_input_stays_a_view_of_it():
    comp = Computation("main", 5, [0, 1], [F, F], [
        Instruction("transpose", 2, [0], F, {"perm": [0, 1]}, name="tr"),
        Instruction("add", 3, [2, 1], F, name="a"),
        Instruction("tuple", 4, [2, 3], ["tuple", [F, F]], free=[2, 3], name="t"),
    ], 4, ["tuple", [F, F]])
    plain, fused, regions = _fused(comp)
    (region,) = regions
    assert [region.nodes[k].op for k in region.outputs] == ["add"]  # the transpose is not copied out
    args = _inputs(F, F)
    view, total = fused(*args)
    assert np.shares_memory(view, args[0])
    _same(plain(*args), (view, total))


def test_a_view_output_reads_its_input_before_the_call_reuses_that_register():
    """`m` takes slot 1, y's, which `a` freed; the transpose of y is an output too: it must be
    taken of y, not of m (one statement reads every input before writing any output)."""
    comp = Computation("main", 5, [0, 1], [F, F], [
        Instruction("transpose", 2, [1], F, {"perm": [0, 1]}, name="tr"),
        Instruction("add", 3, [0, 1], F, free=[1], name="a"),
        Instruction("multiply", 1, [3, 0], F, free=[0, 3], name="m"),
        Instruction("tuple", 4, [2, 1], ["tuple", [F, F]], free=[1, 2], name="t"),
    ], 4, ["tuple", [F, F]])
    plain, fused, _ = _fused(comp)
    args = _inputs(F, F)
    _same(plain(*args), fused(*args))
