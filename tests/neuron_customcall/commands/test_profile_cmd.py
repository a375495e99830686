"""`neuron-customcall profile`: the summary table and the trace JSON, from random inputs (seeded:
the same trace twice) and from an npz; bad inputs are a message, not a traceback."""
from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import pytest

import hlo
from neuron_customcall.cli import main
from neuron_customcall.compiler import compile_module


def _mlp(x, w1, b1, w2):
    return jax.nn.softmax(jax.nn.relu(x @ w1 + b1) @ w2)


@pytest.fixture(scope="module")
def neff(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[np.ndarray]]:
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((16, 64), (64, 32), (32,), (32, 10))]
    proto = jax.jit(_mlp).lower(*args).compiler_ir("hlo").as_serialized_hlo_module_proto()
    path = tmp_path_factory.mktemp("profile") / "mlp.neff"
    path.write_bytes(compile_module(hlo.load(proto)))
    return path, args


def _device_events(trace: dict) -> list[dict]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] != "host"]


def test_profile_prints_the_summary_and_writes_the_trace(neff, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path, _ = neff
    trace = tmp_path / "t.json"
    assert main(["profile", str(path), "-o", str(trace), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "estimated time of one execution" in out and "top 3 instructions" in out
    for engine in ("tensor", "vector", "scalar", "gpsimd", "dma"):
        assert f"\n{engine} " in out
    table = out.split("top 3 instructions by estimated cycles:\n")[1].splitlines()
    assert len([line for line in table[1:] if line.strip() and not line.startswith("wrote")]) == 3
    first = json.loads(trace.read_text())
    assert any(e["args"]["op"] == "dot" for e in _device_events(first))
    assert first["otherData"]["total_cycles"] > 0
    again = tmp_path / "again.json"
    assert main(["profile", str(path), "-o", str(again)]) == 0
    strip = lambda t: [(e["name"], e["ts"], e["dur"]) for e in _device_events(t)]  # noqa: E731
    assert strip(json.loads(again.read_text())) == strip(first)


def test_profile_with_npz_inputs_and_default_output(neff, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path, args = neff
    local = tmp_path / "copy.neff"
    local.write_bytes(path.read_bytes())
    inputs = tmp_path / "in.npz"
    np.savez(inputs, *args)
    assert main(["profile", str(local), "--inputs", str(inputs)]) == 0
    assert (tmp_path / "copy.trace.json").exists()
    assert "wrote" in capsys.readouterr().out


def test_bad_inputs_are_reported(neff, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path, _ = neff
    bad = tmp_path / "bad.npz"
    np.savez(bad, np.zeros(3, np.float32))
    assert main(["profile", str(path), "--inputs", str(bad)]) == 1
    assert "inputs" in caplog.text
    assert main(["profile", str(tmp_path / "missing.neff")]) == 1
