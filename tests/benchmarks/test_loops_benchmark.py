"""benchmarks/loops_vs_xla_cpu.py runs (one run of one workload in a worker process, which checks
our answer against XLA:CPU before timing) and prints a row per workload and tree. Not timed."""
from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import loops_vs_xla_cpu as bench

ROOT = Path(__file__).resolve().parents[2]


def test_one_run_prints_a_row_per_tree(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--runs", "1", "--only", "scan", "--tree", f"a={ROOT}", "--tree", f"b={ROOT}"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("scan, 2000 steps")]
    assert [line.split()[5] for line in rows] == ["a", "b"]


def test_every_workload_counts_its_iterations() -> None:
    chosen = bench.workloads()
    assert len(chosen) == 4 and all(iterations > 0 for _, _, iterations in chosen.values())
