"""A .pt2 exported from a model holding NKI kernels loads and runs in a new process (issue 17): the
graph's ``neuron::nki_call`` carries the kernel descriptor with its serialised IR (the project's
own format, no pickle), not an index into the exporting process's list of traces."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import neuron_customcall.torch_xla  # noqa: F401  (registers neuron::nki_call)
from neuron_customcall.kernels import build
from neuron_customcall.kernels.descriptor import DescriptorError, decode
from neuron_customcall.torch_xla import custom_call
from tests.neuron_customcall.kernels.seed_kernels import nki_tensor_add

ROOT = Path(__file__).resolve().parents[3]

_LOAD_AND_RUN = """
import sys
import numpy as np, torch
import neuron_customcall.torch_xla  # the adapter defines neuron::nki_call; no kernel source is imported
prog = torch.export.load(sys.argv[1])
a, b = (torch.from_numpy(np.load(p)) for p in sys.argv[2:4])
out = prog.module()(a, b)
np.save(sys.argv[4], out.detach().numpy())
assert not [m for m in sys.modules if m.startswith("tests")], "the kernel's module was imported"
print("OK")
"""


class _Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(-1, 1, 1024))

    def forward(self, a, b):
        return nki_tensor_add(a, b * self.w) * a


def test_exported_program_runs_in_a_fresh_process(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    a, b = (torch.from_numpy(rng.standard_normal((256, 1024), dtype=np.float32)) for _ in range(2))
    model = _Model()
    with torch.no_grad():
        expected = ((a + b * model.w) * a).numpy()
    exported = torch.export.export(model, (a, b), strict=False)
    calls = [n for n in exported.graph.nodes if str(n.target) == "neuron.nki_call.default"]
    assert len(calls) == 1
    config = calls[0].args[1]
    assert isinstance(config, str) and decode(config).name == "nki_tensor_add_kernel_"
    path = tmp_path / "model.pt2"
    torch.export.save(exported, path)
    np.save(tmp_path / "a.npy", a.numpy())
    np.save(tmp_path / "b.npy", b.numpy())
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "PJRT_DEVICE": "CPU", "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", _LOAD_AND_RUN, str(path), str(tmp_path / "a.npy"),
                           str(tmp_path / "b.npy"), str(tmp_path / "out.npy")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode == 0 and "OK" in done.stdout, done.stderr[-3000:]
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), expected, rtol=1e-6, atol=1e-6)


def test_a_config_met_first_in_a_loaded_graph_is_decoded_once() -> None:
    """What a fresh process does on its first call: the call rebuilt from the descriptor alone
    runs as the traced one does."""
    a, b = torch.rand(256, 1024), torch.rand(256, 1024)
    key, *_ = custom_call._prepare(id(_kernel()), (2, 2), (custom_call._spec(a), custom_call._spec(b)), ())
    rebuilt = build.nki_call_from_config(key)
    assert rebuilt.outputs == custom_call._call_of(key).outputs
    saved = custom_call._CALLS.pop(key)
    try:
        out = torch.ops.neuron.nki_call([a, b], key)
        assert custom_call._CALLS[key] is not saved  # decoded from the string
        torch.testing.assert_close(out[0], a + b)
    finally:
        custom_call._CALLS[key] = saved


def _kernel():
    from tests.neuron_customcall.kernels.seed_kernels import nki_tensor_add_kernel_

    return nki_tensor_add_kernel_


def test_only_nki_descriptors_are_accepted() -> None:
    """A graph read from a file must not bring native code in through neuron::nki_call."""
    from tests.neuron_customcall.kernels.test_descriptor import GPSIMD_DESC, NKI_DESC
    from neuron_customcall.kernels.descriptor import encode

    with pytest.raises(DescriptorError, match="not an NKI kernel"):
        torch.ops.neuron.nki_call([torch.zeros(4, 4)], encode(GPSIMD_DESC))
    with pytest.raises(DescriptorError, match="not kernel IR"):
        torch.ops.neuron.nki_call([torch.zeros(256, 1024)] * 2, encode(NKI_DESC))
    with pytest.raises(DescriptorError, match="base64"):
        torch.ops.neuron.nki_call([torch.zeros(4)], "not a descriptor!")
