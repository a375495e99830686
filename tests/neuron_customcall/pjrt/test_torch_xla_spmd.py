"""torch_xla's SPMD mode (xr.use_spmd(), xs.mark_sharding) on 2 and 4 emulated NeuronCores against
XLA:CPU with as many devices, each in a fresh process: torch_xla hands the plugin one GSPMD-annotated
program of N partitions, which the SPMD pass turns into the per-core program."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.neuron_customcall.pjrt._proc import ROOT

SCRIPT = """
import json, os
import numpy as np
import torch, torch_xla
import torch_xla.runtime as xr
import torch_xla.distributed.spmd as xs
xr.use_spmd()
n = xr.global_runtime_device_count()
device = torch_xla.device()
mesh = xs.Mesh(np.arange(n), (n // 2, 2), ("data", "model"))
torch.manual_seed(0)
# 5 hidden units in 2 tiles: uneven shards, which XLA pads
model = torch.nn.Sequential(torch.nn.Linear(12, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3)).to(device)
xs.mark_sharding(model[0].weight, mesh, ("model", None))
xs.mark_sharding(model[2].weight, mesh, (None, "model"))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 12), torch.randn(8, 3)
losses = []
for _ in range(3):
    xd, yd = x.to(device), y.to(device)
    xs.mark_sharding(xd, mesh, ("data", None))
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(xd), yd)
    loss.backward()
    opt.step()
    torch_xla.sync()
    losses.append(loss.item())
print("RESULT " + json.dumps({"devices": n, "losses": losses,
                              "params": [p.detach().cpu().numpy().ravel().tolist() for p in model.parameters()]}))
"""


def _run(device: str, cores: int) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
           "PJRT_DEVICE": device, "NEURON_RT_NUM_CORES": str(cores), "CPU_NUM_DEVICES": str(cores)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))[7:])


@pytest.mark.parametrize("cores", [2, 4])
def test_sharded_training_matches_xla_cpu(cores):
    mine, ref = _run("NEURON", cores), _run("CPU", cores)
    assert mine["devices"] == ref["devices"] == cores
    np.testing.assert_allclose(mine["losses"], ref["losses"], rtol=1e-5)
    for a, b in zip(mine["params"], ref["params"]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
