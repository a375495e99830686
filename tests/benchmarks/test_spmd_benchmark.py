"""benchmarks/spmd_data_parallel.py runs (--quick, in its own process: it selects JAX's platforms and
device counts) and writes a row per formulation, core count and clock. Not a timed test."""
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
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "spmd_data_parallel.py"), "--quick", "--runs",
                           "2", "--json", str(out)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = read_json(out)
    assert [r.workload for r in rows] == [f"{form}, {n} core(s), {clock} time" for form in
                                          ("shard_map", "jit + NamedSharding") for n in (1, 2, 4)
                                          for clock in ("CPU", "wall")]
    assert all(r.ours_s > 0 and r.peer_s > 0 for r in rows)
    assert "|loss diff|" in proc.stdout
