"""benchmarks/pjrt_data_parallel.py runs at its smallest (two processes under torchrun: one step,
one 1 MB all-reduce, whose sum rank 0 checks) and prints both tables. Not a timed test."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_smallest_run_prints_both_tables() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "pjrt_data_parallel.py"), "--procs", "2",
                           "--steps", "1", "--sizes-mb", "1", "--runs", "1"], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert any(line.startswith("| 2 | ") and line.endswith("| 1.00x |") for line in lines), proc.stdout
    assert any(line.startswith("| 1 MB | ") for line in lines), proc.stdout
