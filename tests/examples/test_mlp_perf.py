"""Example 2 (examples/mlp_perf): the enlarged MLP's inference with the three ReLU variants matches
torch.relu on the CPU, and reports measured and estimated throughputs in the tutorial's order."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mlp_perf" / "inference.py"


def run_example(tmp_path: Path, *args: str) -> tuple[str, list[dict]]:
    results = tmp_path / "results.json"
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--iters", "1", "--batch-size", "8", *args,
                           "--json", str(results)], capture_output=True, text=True,
                          env=dict(os.environ, PJRT_DEVICE="CPU"), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout, json.loads(results.read_text())


def test_three_variants_match_cpu_and_the_estimate_orders_them(tmp_path):
    out, results = run_example(tmp_path)
    assert [r["variant"] for r in results] == ["elementwise", "tcm", "multicore"]
    assert out.count("Inf throughput (iter/sec):") == 6 and "trn1 (estimated)" in out
    for r in results:
        assert r["max_abs_diff"] < 1e-4
        assert r["emulator_iters_per_s"] > 0
        assert r["trn1_inferences_per_s"] == r["trn1_iters_per_s"] * 8
    trn1 = [r["trn1_iters_per_s"] for r in results]
    assert trn1[0] < trn1[1] < trn1[2]  # the tutorial's point: TCM beats element-wise, 8 cores beat 1


def test_gpsimd_only_estimate_says_the_dense_layers_are_left_out(tmp_path):
    out, results = run_example(tmp_path, "--variants", "tcm", "--estimate", "gpsimd")
    assert [r["variant"] for r in results] == ["tcm"]
    assert results[0]["trn1_scope"] == "GpSimd ReLUs only, dense layers NOT included"
    assert "dense layers NOT included" in out and results[0]["trn1_iters_per_s"] > 0
