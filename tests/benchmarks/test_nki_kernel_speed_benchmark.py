"""benchmarks/nki_kernel_speed.py: one quick run against NumPy (no Triton) checks every kernel
against its NumPy floor and gives a wall and a CPU row per workload (not a timed test)."""
from __future__ import annotations

from benchmarks._results import read_json
from tests.sdk.subproc import ROOT, check, run_python


def test_quick_run_gives_wall_and_cpu_rows_per_workload(tmp_path):
    out = tmp_path / "rows.json"
    check(run_python([str(ROOT / "benchmarks" / "nki_kernel_speed.py"), "--rounds", "1",
                      "--skip-peers", "--json", str(out)]))
    rows = read_json(out)
    assert len(rows) == 8
    assert {r.peer for r in rows} == {"numpy floor (wall)", "numpy floor (cpu)"}
    assert all(r.ours_s > 0 and r.peer_s > 0 and r.target == "<= 1.5x" for r in rows)
    assert any(r.workload.startswith("flash-attention fwd") for r in rows)
