"""benchmarks/pjrt_jax_vs_cpu.py runs (--quick, in its own process: it selects JAX's platforms) and
writes its rows in the shared format. Not a timed test."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from benchmarks._results import read_json

ROOT = Path(__file__).resolve().parents[2]


def test_quick_run_writes_rows(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "pjrt_jax_vs_cpu.py"), "--quick", "--runs", "2",
                           "--json", str(out)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = read_json(out)
    names = [r.workload for r in rows]
    assert names == ["MLP inference, CPU time", "MLP inference, wall time", "MLP training step, CPU time",
                     "MLP training step, wall time", "tiny graph (x + 1, 4 floats): per execute, CPU time",
                     "tiny graph (x + 1, 4 floats): per execute, wall time",
                     "tiny graph from NumPy to NumPy: per call, CPU time",
                     "tiny graph from NumPy to NumPy: per call, wall time"]
    assert all(r.ours_s > 0 and r.peer_s > 0 for r in rows)
    assert [r.met is not None for r in rows] == [True, False, True, False, False, False, False, False]
