"""torch.compile(backend="neuron"): FX graphs lowered through torch_xla and run on the emulator.
Training through AOTAutograd ends where the same loop on torch_xla's PJRT CPU device ends."""
from __future__ import annotations

import torch
import torch_xla

import neuron_customcall.torch_xla  # noqa: F401  (registers the backend)
from neuron_customcall.torch_xla.dynamo import NeuronFxGraph
from tests.neuron_customcall.torch_xla.mlp_training import batch, clone_to, make_mlp, train


def test_backend_is_registered() -> None:
    assert "neuron" in torch._dynamo.list_backends(exclude_tags=())


def test_sgd_training_matches_torch_xla_on_pjrt_cpu() -> None:
    torch._dynamo.reset()
    dev = torch_xla.device()
    ref = clone_to(make_mlp(), dev)
    x, y = batch()
    train(ref, x.to(dev), y.to(dev), 10, lambda *state: torch_xla.sync())

    model = make_mlp()
    losses = train(model, x, y, 10, lambda *state: None, forward=torch.compile(model, backend="neuron"))
    for p, q in zip(model.parameters(), ref.parameters()):
        assert p.device.type == "cpu"
        torch.testing.assert_close(p.detach(), q.detach().cpu(), rtol=1e-4, atol=1e-5)
    assert float(losses[-1].detach()) < float(losses[0].detach())


def test_inference_returns_cpu_tensors_and_reuses_traces() -> None:
    torch._dynamo.reset()
    model = make_mlp().eval()
    compiled = torch.compile(model, backend="neuron")
    x, _ = batch()
    with torch.no_grad():
        for _ in range(3):
            out = compiled(x)
        assert out.device.type == "cpu"
        torch.testing.assert_close(out, model(x), rtol=1e-5, atol=1e-5)


def test_fx_graph_with_none_scalar_and_passthrough_outputs() -> None:
    class M(torch.nn.Module):
        def forward(self, a, b, k: int):
            return a * k + b, None, b

    gm = torch.fx.symbolic_trace(M())
    graph = NeuronFxGraph(gm)
    a, b = torch.ones(2, 3), torch.arange(3.0)
    for _ in range(2):
        s, none, passthrough = graph(a, b, 4)
    assert none is None and graph.trace_count == 1
    torch.testing.assert_close(s, a * 4 + b)
    torch.testing.assert_close(passthrough, b)
    graph(a, b, 5)
    assert graph.trace_count == 2


def test_changing_batch_sizes_recompile_or_retrace_correctly() -> None:
    torch._dynamo.reset()
    model = make_mlp()
    compiled = torch.compile(model, backend="neuron")
    for n in (16, 8, 5, 16):  # the second size makes dynamo mark the batch dimension dynamic
        x = torch.randn(n, 32)
        out = compiled(x)
        out.sum().backward()
        torch.testing.assert_close(out, model(x), rtol=1e-5, atol=1e-5)
        assert all(p.grad is not None for p in model.parameters())
