"""A training step of plain torch_xla on PJRT_DEVICE=NEURON is one graph: C++ ops loaded with
``custom_op.load`` become custom-calls in it even though the script never imports
``neuron_customcall.torch_xla`` (starting the NEURON client registers their XLA kernels). Before,
each op ran through torch_xla's CPU fallback: an execution and two transfers per call, five
executions per step of the main job. Checked in a fresh NEURON process, against torch.relu on CPU."""
from __future__ import annotations

import json

from tests.sdk.subproc import ROOT, check, run_python

SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
import torch, torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
import relu_ops
from mlp import MLP

relu_ops.build()
dev = torch_xla.device()
torch.manual_seed(0)
model = MLP(relu_ops.relu, input_size=16).to(dev)
torch.manual_seed(0)
ref = MLP(torch.relu, input_size=16)
opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, ref)]
gen = torch.Generator().manual_seed(1)
executions, graphs, losses = [], [], []
for step in range(4):
    x, y = torch.randn(8, 16, generator=gen), torch.randint(0, 10, (8,), generator=gen)
    pair = []
    for m, opt, d in ((model, opts[0], dev), (ref, opts[1], "cpu")):
        opt.zero_grad()
        loss = torch.nn.functional.nll_loss(m(x.to(d)), y.to(d))
        loss.backward()
        opt.step()
        if d is dev:
            graphs.append(torch_xla._XLAC._get_xla_tensors_hlo([loss, *m.parameters()]))
            before = (met.metric_data("ExecuteTime") or (0,))[0]
            xm.mark_step()
        pair.append(loss.item())
    executions.append((met.metric_data("ExecuteTime") or (0,))[0] - before)
    losses.append(pair)
print("RESULT " + json.dumps({
    "custom_calls": [g.count("AwsNeuronCustomNativeKernel") for g in graphs],
    "executions": executions, "losses": losses}))
"""


def test_cpp_ops_are_custom_calls_in_the_step_graph_without_importing_the_adapter():
    out = check(run_python(["-c", SCRIPT, str(ROOT / "examples" / "mlp_training")], env={"PJRT_DEVICE": "NEURON"}))
    got = json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[7:])
    # Two ReLUs forward and two backward, all in the graph that mark_step runs.
    assert got["custom_calls"] == [4, 4, 4, 4]
    # One execution per step: mark_step's (the loss is read from its result).
    assert got["executions"] == [1, 1, 1, 1]
    for ours, ref in got["losses"]:
        assert abs(ours - ref) <= 1e-5 * max(1.0, abs(ref))
