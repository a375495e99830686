"""A JAX-only or torch-only install works (pyproject's [jax] and [torch] extras): the core packages
and the other framework's adapter import, and an NKI kernel runs, with one framework missing.

Each case runs in a fresh interpreter whose import system refuses the missing framework, as an
environment without it would."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_PRELUDE = """
import importlib.abc, sys
class _Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in MISSING:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _Missing())
import importlib.util
_find = importlib.util.find_spec
importlib.util.find_spec = lambda n, *a: None if n.split(".")[0] in MISSING else _find(n, *a)
"""

_BODY = """
import numpy as np
import hlo, emulator
import neuron_customcall
from neuron_customcall import cli, custom_op, nki
from neuron_customcall.nki import language as nl
import importlib
importlib.import_module(ADAPTER)

@nki.jit
def add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.arange(128)[:, None]
    j = nl.arange(64)[None, :]
    nl.store(out[i, j], value=nl.load(a[i, j]) + nl.load(b[i, j]))
    return out

x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
assert np.array_equal(add(x, x), 2 * x)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in MISSING)
assert not loaded, loaded
print("OK")
"""


@pytest.mark.parametrize("missing,adapter", [
    (("torch", "torch_xla"), "neuron_customcall.jax"),
    (("jax", "jaxlib"), "neuron_customcall.torch_xla"),
    (("sklearn",), "neuron_customcall.commands"),
])
def test_core_and_one_adapter_without_the_other_framework(missing, adapter):
    code = f"MISSING = {set(missing)!r}\nADAPTER = {adapter!r}\n" + _PRELUDE + _BODY
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu", "PJRT_DEVICE": "CPU"}
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       env=env, timeout=300, cwd=ROOT)
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-3000:]
