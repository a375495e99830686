"""backend="neuron" works in a program that never imports neuron_customcall: torch finds it through
the `torch_dynamo_backends` entry point that pyproject.toml declares (issue 17)."""
from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def test_pyproject_declares_the_backend():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    target = data["project"]["entry-points"]["torch_dynamo_backends"]["neuron"]
    module, attr = target.split(":")
    from importlib import import_module

    assert callable(getattr(import_module(module), attr))


def test_torch_compile_finds_neuron_without_importing_us():
    eps = metadata.entry_points(group="torch_dynamo_backends")
    if "neuron" not in eps.names:
        pytest.skip("the installed metadata predates the entry point: reinstall (scripts/bootstrap.sh)")
    code = """
import sys, torch
assert "neuron_customcall" not in sys.modules
f = torch.compile(lambda x: torch.tanh(x) * 2 + 1, backend="neuron")
x = torch.linspace(-2, 2, 16)
torch.testing.assert_close(f(x), torch.tanh(x) * 2 + 1)
assert "neuron_customcall.torch_xla.dynamo" in sys.modules
print("OK")
"""
    env = {"PATH": "/usr/bin:/bin", "PJRT_DEVICE": "CPU", "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300,
                       cwd=ROOT)
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-3000:]
