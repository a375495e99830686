"""torch_xla (PJRT_DEVICE=NEURON) and JAX (the jax_plugins entry point) in one process, each with
its own client of the plugin, run C++ kernels on the neuron device in turn (issue 11: "both
frameworks in one process work"). A fresh process: the suite's own runs both on CPU."""
from __future__ import annotations

import json

from tests.sdk.subproc import check, run_python

SCRIPT = """
import json, sys
import numpy as np
import torch, torch_xla
import jax
sys.path.insert(0, "examples/mlp_training")
import relu_ops
from neuron_customcall.jax import cpp_call

relu_ops.build()
dev = torch_xla.device()
x = np.random.default_rng(0).standard_normal((32, 120)).astype(np.float32)
t = torch.from_numpy(x).to(dev)
first = (relu_ops.relu(t) * 2).cpu().numpy()
j = jax.jit(lambda a: cpp_call("my_ops::relu_forward", a) * 2)(x)
again = (relu_ops.relu(t) + 1).cpu().numpy()
relu = np.maximum(x, 0)
print("RESULT " + json.dumps({
    "jax": sorted(repr(d) for d in j.devices()), "torch": str(dev),
    "errors": [float(np.abs(first - relu * 2).max()), float(np.abs(np.asarray(j) - relu * 2).max()),
               float(np.abs(again - (relu + 1)).max())]}))
"""


def test_torch_xla_and_jax_share_the_neuron_device_in_one_process():
    out = check(run_python(["-c", SCRIPT], env={"PJRT_DEVICE": "NEURON", "JAX_PLATFORMS": "neuron,cpu"}))
    got = json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[len("RESULT "):])
    assert got["torch"] == "xla:0" and got["jax"] == ["NeuronDevice(id=0)"]
    assert got["errors"] == [0.0, 0.0, 0.0]
