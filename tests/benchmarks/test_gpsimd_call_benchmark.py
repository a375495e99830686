"""benchmarks/gpsimd_call.py: one short round gives the fifteen rows (ReLU forward and backward,
back to back, with host work between, with a step's gaps and with a step's varying gaps, the
step's four ops with a step's gaps and with varying ones, and each of the four calls and all four
inside the main job's compiled graph), each against the in-process floor (not a timed test), and
who waited how in each worker case."""
from __future__ import annotations

import re

from benchmarks._results import read_json
from tests.sdk.subproc import ROOT, check, run_python


def test_one_round_gives_a_row_per_op_and_pattern(tmp_path):
    out = tmp_path / "rows.json"
    printed = check(run_python([str(ROOT / "benchmarks" / "gpsimd_call.py"), "--rounds", "1", "--calls", "20",
                                "--graph-steps", "5", "--graph-warmup", "2", "--json", str(out)]))
    rows = read_json(out)
    assert len(rows) == 15
    in_graph = "inside the main job's compiled graph (torch_xla)"
    assert {r.workload.split(" per call, ")[1] for r in rows} == {"back to back", "host work between", "a step's gaps",
                                                                   "a step's varying gaps", in_graph}
    assert sum("four" in r.workload for r in rows) == 3
    assert [r.workload.split(" per call, ")[0] for r in rows if in_graph in r.workload] == [
        "ReLU forward 32x120", "ReLU forward 32x84", "ReLU backward 32x84", "ReLU backward 32x120",
        "the main job's four ReLU calls"]
    assert all(r.peer == "the same call in-process, in the same graph" for r in rows if in_graph in r.workload)
    # The graph's calls, each served by the worker and by the floor, with the gaps before them and
    # the worker's waits over the four, and the step's and the graph run's times in each mode.
    for label in ("relu_forward 32x120", "relu_forward 32x84", "relu_backward 32x84", "relu_backward 32x120",
                  "all four"):
        for served in ("the worker", "the in-process floor"):
            # p50, p90, mean, host CPU, peer CPU, then the host's gap before the call: p10, p50, p90
            line = rf"^  {label} +{served} +(\d+\.\d +){{5}}(-?\d+ +){{2}}-?\d+"
            assert re.search(line, printed, re.M), (label, served)
    assert re.search(r"^  all four +the worker .* (\d+/){7}\d+; \d+\+\d+; \d+\+\d+$", printed, re.M)  # eight shares (WAITS)
    assert len(re.findall(r"^  calls served by .* step .* graph run .* CPU ", printed, re.M)) == 2
    assert all(r.ours_s > 0 and r.peer_s > 0 and r.target == "<= 25 us per call" for r in rows)
    # Each worker case (the step's four ops among them) says how each side waited: shares of
    # calls where the host slept, woke the worker, the worker slept, its poll found the call, it
    # slept on a timer until just before the call, it found the host on its CPU, it followed no
    # plan for a gap whose plans had been missing, a graph run's prime had it poll for the call
    # (none outside a graph; each side either slept or did not: the host's sleeps and polls add
    # up to every call).
    waits = re.findall(r"^  worker, (.+?) {2,}(back to back|host work between|a step's gaps|a step's varying gaps) .* "
                       r"(\d+)/(\d+)/(\d+)/(\d+)/(\d+)/(\d+)/(\d+)/(\d+); (\d+)\+(\d+); (\d+)\+(\d+)$", printed, re.M)
    assert len(waits) == 5 * 4
    assert {w[0].strip() for w in waits} >= {"forward", "backward", "the step's four ops"}
    for case in waits:
        slept, polled = int(case[4]), int(case[5])
        assert 0 <= polled <= 100 - slept + 1  # rounded shares
        assert 0 <= int(case[6]) <= 101 and 0 <= int(case[7]) <= 101 and 0 <= int(case[8]) <= 101
        assert int(case[9]) == 0  # no graph runs, no primes
    assert re.search(r"how late its timed sleeps end: \d+\.\d us", printed)
