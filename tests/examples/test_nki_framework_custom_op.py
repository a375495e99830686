"""Example 3 (examples/nki_framework_custom_op.py): the NKI addition kernel in torch_xla and JAX,
forward, gradients and SGD training, each checked by the example against the plain framework."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "nki_framework_custom_op.py"


def test_nki_custom_op_example_runs_forward_gradients_and_training(tmp_path, capsys, monkeypatch):
    for name in ("NEURON_FRAMEWORK_DEBUG", "NEURON_FRAMEWORK_DEBUG_DIR"):  # --dump sets them: restore after
        monkeypatch.setenv(name, "")
    spec = importlib.util.spec_from_file_location("nki_framework_custom_op", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    example.main(["--dump", str(tmp_path)])
    out = capsys.readouterr().out
    assert out.count('custom_call_target="AwsNeuronCustomNativeKernel"') == 2
    assert "API_VERSION_UNSPECIFIED" in out and "API_VERSION_STATUS_RETURNING" in out
    assert "torch_xla: forward and gradients match PyTorch" in out and "jax: forward and gradients match JAX" in out
    for framework in ("torch_xla", "jax"):
        first, last = map(float, re.search(rf"{framework}: 5 SGD steps, loss (\S+) -> (\S+)", out).groups())
        assert last < first
    assert list(tmp_path.glob("*.pbtxt")) and list(tmp_path.glob("*.hlo.txt"))
