"""tools/xla_corpus.py: splitting a corpus directory, comparing outputs, rewriting for XLA:CPU,
and the whole driver on a few hand-written modules (each in its own subprocess)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tools import xla_corpus as xc

ADD = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""

GOOD = "// RUN: some_tool %s | FileCheck %s\n" + ADD + """
fusion {
  x = f32[4,6] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4] reduce(x, z), dimensions={1}, to_apply=add
}
// CHECK: something
"""

# two modules in one file; the second is invalid for XLA (transpose result shape is wrong)
SPLIT = """HloModule one
ENTRY e {
  p = s32[3] parameter(0)
  ROOT n = s32[3] negate(p)
}
// -----
HloModule two
ENTRY e {
  p = f32[2,3] parameter(0)
  ROOT t = f32[2,3] transpose(p), dimensions={1,0}
}
"""

FUSED = """f {
  p = f32[2,6] parameter(0)
  b = f32[12] bitcast(p)
  ROOT e = f32[12] exponential(b)
}
ENTRY main {
  x = f32[2,6] parameter(0)
  ROOT r = f32[12] fusion(x), kind=kLoop, calls=f
}
"""

# the init value of the reduce is a parameter: XLA may apply it more than once
PARAM_INIT = ADD + """
fusion {
  x = s32[4,4096] parameter(0)
  i = s32[] parameter(1)
  ROOT r = s32[4] reduce(x, i), dimensions={1}, to_apply=add_s32
}
""".replace("to_apply=add_s32", "to_apply=add2").replace("fusion {", """add2 {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}

fusion {""")


def test_modules_in_splits_files_and_drops_test_directives(tmp_path):
    (tmp_path / "good.hlo").write_text(GOOD)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "split.hlo").write_text(SPLIT)
    mods = dict(xc.modules_in(tmp_path))
    assert sorted(mods) == ["good", "sub/split#0", "sub/split#1"]
    assert "RUN" not in mods["good"] and "CHECK" not in mods["good"]
    assert mods["sub/split#1"].startswith("HloModule two")


def test_as_calls_rewrites_fusions_and_bitcasts():
    out = xc.as_calls(FUSED)
    assert "fusion(" not in out and "bitcast(" not in out and "kind=" not in out
    assert "call(x), to_apply=f" in out and "reshape(p)" in out


def test_compare_classifies_differences():
    f = np.array([1.0, 2.0, np.nan, np.inf], np.float32)
    assert xc.compare([f], [f.copy()])[0]
    assert xc.compare([f + 1e-7], [f])[0]
    assert not xc.compare([f + np.float32(0.01)], [f])[0]
    g = f.copy()
    g[2] = 0
    assert "NaN" in xc.compare([g], [f])[1]
    assert not xc.compare([np.array([1, 2], np.int32)], [np.array([1, 3], np.int32)])[0]
    assert "dtype" in xc.compare([np.zeros(2, np.int32)], [np.zeros(2, np.int64)])[1]
    assert "shape" in xc.compare([np.zeros(2)], [np.zeros(3)])[1]
    assert "outputs" in xc.compare([], [np.zeros(1)])[1]


def test_random_inputs_are_seeded_and_typed():
    import hlo

    m = hlo.load(SPLIT.split("// -----")[0])
    a = xc.random_inputs([p.shape for p in m.entry.parameters])
    b = xc.random_inputs([p.shape for p in m.entry.parameters])
    assert a[0].dtype == np.int32 and a[0].shape == (3,) and np.array_equal(a[0], b[0])
    assert a[0].min() >= 0


@pytest.mark.slow
def test_driver_classifies_a_small_corpus(tmp_path):
    (tmp_path / "good.hlo").write_text(GOOD)
    (tmp_path / "split.hlo").write_text(SPLIT)
    (tmp_path / "fused.hlo").write_text(FUSED)
    (tmp_path / "param_init.hlo").write_text(PARAM_INIT)
    report = tmp_path / "r.json"
    code = xc.main([str(tmp_path), "--jobs", "2", "--timeout", "120", "--runs", "1", "--json", str(report)])
    results = {r["name"]: r for r in json.loads(report.read_text())["results"]}
    assert code == 0
    assert results["good"]["cls"] in ("match", "slow")
    assert results["split#0"]["cls"] in ("match", "slow")
    assert results["split#1"]["cls"] == "xla_refused"
    # XLA:CPU's jaxlib path takes no fusion: the reference is the module with calls, and says so
    assert results["fused"]["cls"] in ("match", "slow") and "fusions as calls" in results["fused"]["detail"]
    assert results["param_init"]["cls"] in ("match", "slow", "undefined")


DYNAMIC = """HloModule dyn
ENTRY e {
  x = f32[4,3] parameter(0)
  n = s32[] parameter(1)
  xs = f32[1,3] slice(x), slice={[0:1], [0:3]}
  d = f32[<=4,3] set-dimension-size(x, n), dimensions={0}
  t = f32[3,<=4] transpose(d), dimensions={1,0}
  row = f32[3] reshape(xs)
  ROOT r = (f32[<=4,3], f32[3], f32[3,<=4]) tuple(d, row, t)
}
"""


def test_dynamic_results_get_their_sizes_and_are_cut_to_them() -> None:
    """A dynamic result is compared on its valid elements only: the module gains the sizes as
    outputs, and each dynamic leaf is read row-major from the start of its buffer."""
    out, dynamic = xc.with_dynamic_sizes(DYNAMIC)
    assert dynamic == [(0, [0]), (2, [1])]
    import hlo

    m = hlo.load(out)
    assert [str(s) for s in m.entry.root.shape.tuple_shapes[3:]] == ["s32[]", "s32[]"]
    buf0 = np.arange(12, dtype=np.float32).reshape(4, 3)
    buf2 = np.arange(12, dtype=np.float32).reshape(3, 4)
    parts = xc.valid_parts([buf0, np.zeros(3, np.float32), buf2, np.int32(2), np.int32(2)], dynamic)
    np.testing.assert_array_equal(parts[0], buf0[:2])
    np.testing.assert_array_equal(parts[2], np.arange(6, dtype=np.float32).reshape(3, 2))
    assert xc.with_dynamic_sizes(SPLIT.split("// -----")[0]) == (SPLIT.split("// -----")[0], [])


UNSTABLE_SORT = """HloModule s
lt {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT r = pred[] compare(a, b), direction=LT
}
ENTRY e {
  k = s32[6] parameter(0)
  v = s32[6] parameter(1)
  ROOT s = (s32[6], s32[6]) sort(k, v), dimensions={0}, to_apply=lt
}
"""


def test_unstable_sort_ties_are_told_from_wrong_answers() -> None:
    """An unstable sort may order the values of equal keys either way (XLA leaves it open); other
    values, or other keys, are a mismatch."""
    import hlo

    m = hlo.load(UNSTABLE_SORT)
    assert xc.unstable_sort_root(m) == 0
    assert xc.unstable_sort_root(hlo.load(UNSTABLE_SORT.replace("to_apply=lt", "is_stable=true, to_apply=lt"))) is None
    keys = np.array([0, 1, 1, 2, 2, 2], np.int32)
    ours, ref = [keys, np.array([5, 1, 2, 3, 4, 0], np.int32)], [keys, np.array([5, 2, 1, 0, 3, 4], np.int32)]
    assert xc.same_up_to_ties(ours, ref, 0)
    assert not xc.same_up_to_ties(ours, [keys, np.array([5, 1, 2, 3, 4, 9], np.int32)], 0)
    assert not xc.same_up_to_ties(ours, [np.array([0, 1, 1, 2, 2, 3], np.int32), ref[1]], 0)
    # along dimension 1 of a matrix: a value moved to another row is a mismatch
    k2 = np.stack([keys, keys])
    assert xc.same_up_to_ties([k2, np.stack([ours[1], ref[1]])], [k2, np.stack([ref[1], ours[1]])], 1)
    assert not xc.same_up_to_ties([k2, np.stack([ours[1], ours[1] + 1])], [k2, np.stack([ref[1], ref[1]])], 1)


def test_modules_drawing_random_numbers_are_recognised() -> None:
    import hlo

    rng = hlo.load("HloModule r\nENTRY e {\n  a = f32[] constant(0)\n  b = f32[] constant(1)\n"
                   "  ROOT r = f32[4] rng(a, b), distribution=rng_uniform\n}\n")
    assert xc.draws_random_numbers(rng)
    assert not xc.draws_random_numbers(hlo.load(UNSTABLE_SORT))
    seed = hlo.load('HloModule s\nENTRY e {\n  ROOT s = u64[] custom-call(), custom_call_target="GetRngSeed"\n}\n')
    assert xc.draws_random_numbers(seed)


@pytest.mark.parametrize("marks, side", [([], "neither side started"), (["xla"], "XLA:CPU"),
                                         (["xla", "ours"], "ours")])
def test_a_timeout_says_whose_code_was_running(tmp_path, monkeypatch, marks, side) -> None:
    """An endless loop runs forever on both sides; a loop that is only slow here is ours to fix:
    the stage marks the worker printed before it was stopped tell them apart."""
    import argparse
    import subprocess

    def stopped(cmd, **kwargs):
        err = "".join(f"{xc.STAGE_MARK}{m}\n" for m in marks)
        raise subprocess.TimeoutExpired(cmd, kwargs["timeout"], output="", stderr=err)

    monkeypatch.setattr(subprocess, "run", stopped)
    args = argparse.Namespace(timeout=1.0, runs=1, slow_factor=10.0, memory_gib=1.0)
    r = xc.run_in_subprocess(tmp_path, "m", args, "xla")
    assert r.cls == "timeout" and r.detail.endswith(f"(running: {side})")


def test_report_is_written_after_every_module_and_resumes(tmp_path, monkeypatch) -> None:
    """A batch killed half-way keeps what ran (the report is rewritten after each module, marked
    incomplete), and --resume runs only the modules the report does not hold."""
    (tmp_path / "split.hlo").write_text(SPLIT)
    (tmp_path / "good.hlo").write_text(GOOD)
    report = tmp_path / "r.json"
    ran: list[str] = []

    def killed_after_first(directory, name, args):
        if ran:
            raise KeyboardInterrupt  # the batch is stopped while the second module runs
        ran.append(name)
        return xc.Result(name, "match", "1.0x XLA:CPU")

    monkeypatch.setattr(xc, "run_module", killed_after_first)
    with pytest.raises(KeyboardInterrupt):
        xc.main([str(tmp_path), "--jobs", "1", "--json", str(report)])
    kept = json.loads(report.read_text())
    assert kept["complete"] is False and [r["name"] for r in kept["results"]] == ran

    rest: list[str] = []
    monkeypatch.setattr(xc, "run_module", lambda d, n, a: rest.append(n) or xc.Result(n, "our_refused", "x"))
    assert xc.main([str(tmp_path), "--jobs", "1", "--json", str(report), "--resume"]) == 0
    final = json.loads(report.read_text())
    assert final["complete"] is True
    assert sorted(rest) == sorted({"good", "split#0", "split#1"} - set(ran))
    assert sorted(r["name"] for r in final["results"]) == ["good", "split#0", "split#1"]


def test_match_selects_modules_by_regular_expression(tmp_path, monkeypatch) -> None:
    (tmp_path / "split.hlo").write_text(SPLIT)
    (tmp_path / "good.hlo").write_text(GOOD)
    seen: list[str] = []
    monkeypatch.setattr(xc, "run_module", lambda d, n, a: seen.append(n) or xc.Result(n, "match"))
    xc.main([str(tmp_path), "--match", r"#1$"])
    assert seen == ["split#1"]


def test_constant_inits_that_are_no_identity_are_recognised() -> None:
    import hlo

    def module(op: str, init: str) -> str:
        return (f"HloModule m\nr {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] {op}(a, b)\n}}\n"
                f"ENTRY e {{\n  x = f32[4] parameter(0)\n  i = f32[] constant({init})\n"
                f"  ROOT w = f32[3] reduce-window(x, i), window={{size=2}}, to_apply=r\n}}\n")

    assert xc.constant_init_not_identity(hlo.load(module("add", "5")))
    assert xc.constant_init_not_identity(hlo.load(module("multiply", "0")))
    assert not xc.constant_init_not_identity(hlo.load(module("add", "0")))
    assert not xc.constant_init_not_identity(hlo.load(module("maximum", "-inf")))
    assert not xc.constant_init_not_identity(hlo.load(module("minimum", "inf")))
