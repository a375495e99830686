"""benchmarks/torch_xla_device.py: its CPU-time reader counts child processes, and one round of
one step on each device gives the two rows (not a timed test)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

from benchmarks import torch_xla_device
from benchmarks._results import read_json
from tests.sdk.subproc import ROOT, check, run_python


def test_cpu_time_of_a_process_tree_includes_its_children():
    spin = "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass\n"
    own = lambda: sum(os.times()[:2])  # noqa: E731  (this process alone: the child is not waited for)
    before, own_before = torch_xla_device.tree_cpu_seconds(os.getpid()), own()
    child = subprocess.Popen([sys.executable, "-c", spin + "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        while torch_xla_device.tree_cpu_seconds(child.pid) < 0.5:
            time.sleep(0.05)
        children = torch_xla_device.tree_cpu_seconds(os.getpid()) - before - (own() - own_before)
        assert children >= 0.45
    finally:
        child.communicate(b"")


def test_one_round_gives_wall_and_cpu_rows(tmp_path):
    # 30 steps: CPU time falls back to /proc's 10 ms ticks without schedstat, where one ~1.5 ms step read 0
    out = tmp_path / "rows.json"
    check(run_python([str(ROOT / "benchmarks" / "torch_xla_device.py"), "--rounds", "1", "--steps", "30",
                      "--warmup", "0", "--json", str(out)]))
    rows = read_json(out)
    assert [r.workload.rsplit(", ", 1)[1] for r in rows] == ["wall time", "CPU time"]
    assert all(r.ours_s > 0 and r.peer_s > 0 and r.target == "<= 1.3x" for r in rows)


def test_against_another_tree_adds_its_neuron_rows_to_the_same_rounds():
    # the tree compared against is this one: its worker runs the same step with the same losses
    out = check(run_python([str(ROOT / "benchmarks" / "torch_xla_device.py"), "--rounds", "1", "--steps", "3",
                            "--warmup", "2", "--against", str(ROOT)]))
    lines = [line for line in out.splitlines() if "ratio" in line]
    assert len(lines) == 4 and sum(f"NEURON of {ROOT}" in line for line in lines) == 2
