"""The plugin under torch_xla's PJRT C API client (HLO programs, a replicated compile for both cores,
execution on one device): registered here under a test name with torch_xla's own plugin API, so that
this checks the plugin itself (the PJRT_DEVICE=NEURON registration is the torch_xla adapter's)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.neuron_customcall.pjrt._proc import ROOT

SCRIPT = """
import json, os
os.environ["PJRT_DEVICE"] = "NEURONTEST"
import torch, torch_xla
from torch_xla.experimental import plugins
from neuron_customcall.pjrt import library_path

class NeuronTest(plugins.DevicePlugin):
    def library_path(self):
        return library_path()

plugins.register_plugin("NEURONTEST", NeuronTest())
import torch_xla.runtime as xr
device = torch_xla.device()
torch.manual_seed(0)
a, b = torch.randn(64, 32), torch.randn(32, 16)
w = torch.randn(16, 16, requires_grad=True)
out = torch.relu(a.to(device) @ b.to(device))
wd = w.detach().to(device).requires_grad_()
loss = (out @ wd).square().mean()
loss.backward()
torch_xla.sync()
ref = torch.relu(a @ b)
ref_loss = (ref @ w).square().mean()
ref_loss.backward()
print("RESULT " + json.dumps({
    "devices": xr.global_runtime_device_count(),
    "err": float((out.cpu() - ref).abs().max()),
    "loss_rel_err": abs(loss.item() - ref_loss.item()) / abs(ref_loss.item()),
    "grad_err": float((wd.grad.cpu() - w.grad).abs().max()),
}))
"""


def test_torch_xla_runs_programs_on_the_plugin():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert got["devices"] == 2  # torch_xla compiles for every device: 2 replicas, run one per core
    assert got["err"] < 1e-4 and got["loss_rel_err"] < 1e-5 and got["grad_err"] < 1e-3
