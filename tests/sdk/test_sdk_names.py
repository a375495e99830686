"""The SDK's import names (sdk/): each is our module itself, code written for the SDK runs, and
their presence changes nothing in torch_xla's start-up or device choice."""
from __future__ import annotations

import ast

import pytest

from tests.sdk.subproc import PROGRAMS, SDK, check, run_python

IDENTITY = """
import neuronxcc.nki as a, neuronxcc.nki.language as nl, neuronxcc.nki.isa as nisa
from neuronxcc import nki as b
import nki as c, nki.language as nl2, nki.isa as nisa2
import neuronxcc.nki.lang.memory as mem
from torch_neuronx.xla_impl import custom_op
from torch_neuronx import nki_jit
from jax_neuronx import nki_call
import neuron_customcall.nki as ours, neuron_customcall.custom_op as co, neuron_customcall.jax as nj
import neuron_customcall.nki.lang.memory as ours_mem
import neuron_customcall.nki.isa.beta2 as beta2
from nki import isa as nisa3, jit
checks = [a is ours, b is ours, c.language is ours.language, jit is ours.jit, nl is ours.language,
          nl2 is ours.language, nisa is ours.isa, nisa2 is beta2, nisa3 is beta2, c.isa is beta2,
          mem is ours_mem, custom_op.load is co.load, nki_jit is ours.jit,
          custom_op.load_library is co.load_library, nki_call is nj.nki_call]
print(checks)
assert all(checks)
"""


def test_each_name_is_our_module_itself():
    check(run_python(["-c", IDENTITY]))


SPMD_ADD = """
import numpy as np
from spmd_tensor_addition_nki_kernels import nki_tensor_add

a = np.random.default_rng(0).standard_normal((256, 1024), dtype=np.float32)
b = np.random.default_rng(1).standard_normal((256, 1024), dtype=np.float32)
np.testing.assert_array_equal(nki_tensor_add(a, b), a + b)
print("ok")
"""


def test_a_kernel_written_against_neuronxcc_nki_runs():
    assert check(run_python(["-c", SPMD_ADD], cwd=PROGRAMS)).strip() == "ok"


STARTUP = """
import os, torch_neuronx, torch, torch_xla, torch_xla.runtime as xr
assert not torch_xla._found_libneuronxla
print(xr.device_type(), os.environ.get("PJRT_DEVICE"))
t = torch.arange(6.0).to(torch_xla.device()) * 2
print(t.cpu().tolist())
"""


@pytest.mark.parametrize("device", [None, "CPU"])
def test_torch_neuronx_leaves_torch_xla_on_the_device_asked_for(device):
    """torch_xla probes libneuronxla and torch_neuronx at import to detect a Trainium host; with
    our torch_neuronx importable it must still start, and pick CPU (unset: its own default)."""
    env = {"PJRT_DEVICE": device} if device else {}
    out = check(run_python(["-c", STARTUP], env=env, drop=("PJRT_DEVICE",)))
    assert out.splitlines() == ["CPU CPU", "[0.0, 2.0, 4.0, 6.0, 8.0, 10.0]"]


def _statements(path):
    tree = ast.parse(path.read_text())
    body = tree.body[1:] if tree.body and isinstance(tree.body[0], ast.Expr) else tree.body  # docstring
    return body


def _re_export_only(node: ast.stmt) -> bool:
    """An import, ``__all__ = [...]``, or the one alias_package(__name__, "..."[, {...}]) call."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return True
    if isinstance(node, ast.Assign):
        return [getattr(t, "id", None) for t in node.targets] == ["__all__"]
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        call = node.value
        return (getattr(call.func, "id", None) == "alias_package" and len(call.args) in (2, 3)
                and getattr(call.args[0], "id", None) == "__name__" and isinstance(call.args[1], ast.Constant)
                and all(isinstance(d, ast.Dict) and all(isinstance(v, ast.Constant) for v in d.keys + d.values)
                        for d in call.args[2:]))
    return False


def test_the_sdk_distribution_has_no_logic_of_its_own():
    files = sorted(SDK.rglob("*.py"))
    assert {f.relative_to(SDK).parts[0] for f in files} == {"torch_neuronx", "jax_neuronx", "neuronxcc", "nki"}
    for path in files:
        bad = [ast.dump(node)[:80] for node in _statements(path) if not _re_export_only(node)]
        assert not bad, f"{path.relative_to(SDK)}: {bad}"
        for node in _statements(path):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module.split(".")[0] in {"neuron_customcall", "torch_neuronx"}, (path, node.module)
