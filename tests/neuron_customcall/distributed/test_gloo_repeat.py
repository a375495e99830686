"""An all-reduce between two processes repeated over runs goes to its pair exchange without the
checks of its first call (GlooCommunicator._reduce_again) and hands out a pooled buffer as its
result (distributed/blocks.py): every run's result, kept while later runs reduce, equals NumPy's
reduction of its own inputs; a pool keeps only two free buffers once results are dropped; and
a rank that reaches another collective at a repeated call still fails on both ranks."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.neuron_customcall.distributed import ranks

ROOT = Path(__file__).resolve().parents[3]
WORKER = Path(__file__).with_name("repeat_worker.py")

PROGRAM = """HloModule repeat, replica_count=2
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
max {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT r = s32[] maximum(a, b)
}
ENTRY e {
  f = f32[30,100] parameter(0)
  i = s32[5000] parameter(1)
  g = f32[30,100] multiply(f, f)
  f_sum = f32[30,100] all-reduce(f), replica_groups={{0,1}}, to_apply=add
  g_sum = f32[30,100] all-reduce(g), replica_groups={{0,1}}, to_apply=add
  i_max = s32[5000] all-reduce(i), replica_groups={{0,1}}, to_apply=max
  ROOT t = (f32[30,100], f32[30,100], s32[5000]) tuple(f_sum, g_sum, i_max)
}"""
RUNS = 4


def _run(tmp_path: Path, inputs: list[list[np.ndarray]], **env: str) -> list[int]:
    (tmp_path / "m.hlo").write_text(PROGRAM)
    np.savez(tmp_path / "in.npz", **{f"r{r}_{k}": a for r, ins in enumerate(inputs) for k, a in enumerate(ins)})
    return ranks.finish(ranks.start(WORKER, [str(tmp_path / "m.hlo"), str(tmp_path / "in.npz"), str(tmp_path / "out"),
                                             str(RUNS)], 2, **env), (0, 2))


def _inputs() -> list[list[np.ndarray]]:
    rng = np.random.default_rng(5)
    return [[rng.standard_normal((30, 100)).astype(np.float32), rng.integers(-1000, 1000, 5000).astype(np.int32)]
            for _ in range(2)]


def test_every_kept_result_of_a_repeated_all_reduce_is_its_own_run_s(tmp_path: Path) -> None:
    inputs = _inputs()
    assert _run(tmp_path, inputs) == [0, 0]
    for k in range(RUNS):
        f = [x[0] * (k + 1) for x in inputs]
        i = [x[1] * (k + 1) for x in inputs]
        want = [f[0] + f[1], f[0] * f[0] + f[1] * f[1], np.maximum(i[0], i[1])]
        for rank in range(2):
            with np.load(tmp_path / f"out{rank}.run{k}.npz", allow_pickle=False) as z:
                got = [z[f"arr_{j}"] for j in range(3)]
            for g, w in zip(got, want):
                assert g.dtype == w.dtype and g.shape == w.shape
                np.testing.assert_array_equal(g, w, err_msg=f"run {k}, rank {rank}")
    for rank in range(2):
        kept, dropped, only_groups_hold_buckets, _ = json.loads((tmp_path / f"out{rank}.pools.json").read_text())
        assert only_groups_hold_buckets == [True]  # two processes: the pair exchange's one group
        # f32 add (two instructions share the result pool: two buffers a run), s32 maximum (one a run)
        assert sorted(kept.values()) == [RUNS, 2 * RUNS] and len(kept) == 2, kept
        assert sorted(dropped.values()) == [2, 2], dropped


@pytest.mark.parametrize("window_us", ["6000", "0", ""])
def test_a_repeated_all_reduce_polls_its_gloo_call_when_told_to(tmp_path: Path, window_us: str) -> None:
    """With NEURON_CUSTOMCALL_COLLECTIVE_POLL_US set, each reduction's first wait polls (its score
    starts at 1; polling.py), and polled waits are counted; 0, or nothing set (the default), never
    polls. Either way the results are right. The workers see no CPU pressure, whatever this
    machine's load (which would stop the polls)."""
    inputs = _inputs()
    env = {"NEURON_CUSTOMCALL_COLLECTIVE_POLL_US": window_us} if window_us else {}
    env["REPEAT_WORKER_IDLE_HOST"] = "1"
    assert _run(tmp_path, inputs, **env) == [0, 0]
    with np.load(tmp_path / "out0.run0.npz", allow_pickle=False) as z:
        np.testing.assert_array_equal(z["arr_0"], inputs[0][0] + inputs[1][0])
    for rank in range(2):
        *_, waits = json.loads((tmp_path / f"out{rank}.pools.json").read_text())
        assert len(waits) == 3, waits  # f_sum, g_sum and i_max, each its own reduction
        for polled, ended in waits:
            assert 0 <= ended <= polled <= 2 * RUNS
            assert (polled >= 1) if window_us == "6000" else (polled == 0), waits


GSUM = "  g_sum = f32[30,100] all-reduce(g), replica_groups={{0,1}}, to_apply=add\n"


@pytest.mark.parametrize("other", [
    # the same size and type in another instruction, or another size and type: the pair
    # exchange's headers say so
    "  x_sum = f32[30,100] all-reduce(g), replica_groups={{0,1}}, to_apply=add\n  g_sum = f32[30,100] add(x_sum, g)\n",
    "  x_max = s32[5000] all-reduce(i), replica_groups={{0,1}}, to_apply=max\n  g_sum = f32[30,100] add(g, g)\n",
])
def test_a_rank_reaching_another_collective_at_a_repeated_call_fails_on_both(tmp_path: Path, other: str) -> None:
    """At run 2, rank 1 runs another module (one all-reduce is another instruction) while rank 0
    repeats its calls."""
    assert GSUM in PROGRAM
    (tmp_path / "m.hlo.rank1.run2").write_text(PROGRAM.replace(GSUM, other))
    assert _run(tmp_path, _inputs()) == [2, 2]
    for rank in range(2):
        message = (tmp_path / f"out{rank}.txt").read_text()
        assert message.startswith("CollectiveError") and "mismatched collectives" in message, message


def test_the_calls_of_one_reduction_have_distinct_digests() -> None:
    """A member one call ahead of the others in the same instruction must not read agreement:
    call numbers mix into the instruction's digest one-to-one (and stay 64-bit)."""
    from neuron_customcall.distributed.gloo import _digest, _mix

    base = _digest("all-reduce s[0] float32[1000] (0, 1) add")
    digests = [_mix(base, seq) for seq in range(1, 100_001)]
    assert len(set(digests)) == len(digests) and max(digests) < 1 << 64
    assert _mix(base, 7) != _mix(_digest("all-reduce t[0] float32[1000] (0, 1) add"), 7)
