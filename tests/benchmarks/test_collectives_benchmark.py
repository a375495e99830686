"""benchmarks/collectives_vs_xla_cpu.py runs (--quick, in its own process: it sets XLA:CPU's host
device count before jax starts) and checks our results against XLA:CPU before timing. Not a timed
test."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quick_run_prints_a_row_per_op_and_device_count():
    done = subprocess.run([sys.executable, "benchmarks/collectives_vs_xla_cpu.py", "--quick"], cwd=str(ROOT),
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.split()[:3] for line in done.stdout.splitlines()[1:]]
    assert rows == [["all-reduce", "2", "1"], ["all-reduce", "4", "1"], ["all-gather", "2", "1"],
                    ["all-gather", "4", "1"]]
