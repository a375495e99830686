"""Example 1 (examples/mlp_training): the C++ ReLU MLP trains on the emulator like torch.relu on
the CPU, on the bundled digits and on MNIST IDX files; the IDX reader reads what the format says."""
from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from tests.sdk.subproc import run_python

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mlp_training"


def _idx_module():
    spec = importlib.util.spec_from_file_location("mlp_training_idx", EXAMPLE / "idx.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_idx(path: Path, array: np.ndarray, code: int) -> None:
    """An IDX file written from the format's definition (independent of the reader)."""
    header = bytes([0, 0, code, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    data = header + array.astype(array.dtype.newbyteorder(">")).tobytes()
    if path.suffix == ".gz":
        data = gzip.compress(data)
    path.write_bytes(data)


def test_idx_reader_reads_every_type_plain_and_gzipped(tmp_path):
    idx = _idx_module()
    rng = np.random.default_rng(0)
    cases = [(rng.integers(0, 256, (3, 4, 5)).astype(np.uint8), 0x08),
             (rng.integers(-9, 9, (7,)).astype(np.int16), 0x0B),
             (rng.standard_normal((2, 3)).astype(np.float32), 0x0D)]
    for k, (array, code) in enumerate(cases):
        for name in (f"a{k}.idx", f"a{k}.idx.gz"):
            write_idx(tmp_path / name, array, code)
            got = idx.read_idx(tmp_path / name)
            assert got.shape == array.shape and got.dtype == array.dtype
            np.testing.assert_array_equal(got, array)


def test_idx_reader_rejects_bad_magic_and_truncation(tmp_path):
    idx = _idx_module()
    (tmp_path / "bad").write_bytes(b"\x01\x00\x08\x01\x00\x00\x00\x01\x05")
    write_idx(tmp_path / "ok", np.arange(6, dtype=np.uint8), 0x08)
    (tmp_path / "short").write_bytes((tmp_path / "ok").read_bytes()[:-1])
    for name in ("bad", "short"):
        with pytest.raises(idx.IdxError):
            idx.read_idx(tmp_path / name)


def run_example(tmp_path: Path, *args: str) -> tuple[str, dict]:
    """The main job in a fresh process: plain torch_xla on PJRT_DEVICE=NEURON (it sets it itself,
    over the suite's CPU), with this checkout's entry points (tests/sdk/subproc.py)."""
    summary = tmp_path / "summary.json"
    proc = run_python([str(EXAMPLE / "train.py"), *args, "--json", str(summary)], env={"PJRT_DEVICE": "CPU"},
                      timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout, json.loads(summary.read_text())


def check_matches_cpu(out: str, s: dict, steps: int) -> None:
    assert out.count("Train throughput (iter/sec):") == 2 and out.count("Final loss is") == 2
    assert f"[{steps:>5d}/{steps}]" in out and "Summary" in out and "held-out accuracy" in out
    assert s["steps"] == steps == len(s["emulator"]["losses"]) == len(s["cpu"]["losses"])
    np.testing.assert_allclose(s["emulator"]["losses"], s["cpu"]["losses"], rtol=1e-4, atol=1e-5)
    assert s["max_param_diff"] < 1e-4
    assert s["emulator"]["throughput"] > 0 and s["cpu"]["throughput"] > 0
    assert abs(s["emulator"]["accuracy"] - s["cpu"]["accuracy"]) <= 1 / s["held_out_samples"] + 1e-9


def test_digits_training_matches_the_cpu_run(tmp_path):
    out, s = run_example(tmp_path, "--epochs", "1", "--limit-steps", "20")
    check_matches_cpu(out, s, 20)
    assert "digits" in s["dataset"] and s["model"] == "MLP 64-120-84-10"
    assert s["emulator"]["losses"][-1] < s["emulator"]["losses"][0]


def test_mnist_idx_files_train_with_their_held_out_set(tmp_path):
    rng = np.random.default_rng(1)
    data = tmp_path / "mnist"
    data.mkdir()
    for kind, n in (("train", 48), ("t10k", 16)):
        write_idx(data / f"{kind}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 28, 28)).astype(np.uint8), 0x08)
        write_idx(data / f"{kind}-labels-idx1-ubyte", rng.integers(0, 10, n).astype(np.uint8), 0x08)
    out, s = run_example(tmp_path, "--mnist", str(data), "--epochs", "2", "--batch-size", "16")
    check_matches_cpu(out, s, 6)
    assert "MNIST" in s["dataset"] and s["model"] == "MLP 784-120-84-10"
    assert s["train_samples"] == 48 and s["held_out_samples"] == 16
