"""benchmarks/gpsimd_call.py: one short round gives the six rows (ReLU forward and backward, back
to back, with host work between and with a step's gaps), each against the in-process floor (not a
timed test)."""
from __future__ import annotations

from benchmarks._results import read_json
from tests.sdk.subproc import ROOT, check, run_python


def test_one_round_gives_a_row_per_op_and_pattern(tmp_path):
    out = tmp_path / "rows.json"
    check(run_python([str(ROOT / "benchmarks" / "gpsimd_call.py"), "--rounds", "1", "--calls", "20",
                      "--json", str(out)]))
    rows = read_json(out)
    assert len(rows) == 6
    assert {r.workload.split(" per call, ")[1] for r in rows} == {"back to back", "host work between", "a step's gaps"}
    assert all(r.ours_s > 0 and r.peer_s > 0 and r.target == "<= 25 us per call" for r in rows)
