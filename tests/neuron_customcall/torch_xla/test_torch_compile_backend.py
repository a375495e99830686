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


def test_batchnorm_buffers_and_zero_dim_counters_are_updated_every_step() -> None:
    # torch_xla folds 0-d tensors holding 0 or 1 into constants; num_batches_tracked starts at 0.
    # The reference is torch_xla on its PJRT CPU device (its running_var differs from eager CPU's).
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    dev = torch_xla.device()
    ref = clone_to(model, dev)
    compiled = torch.compile(model, backend="neuron")
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, ref)]
    for _ in range(4):
        x = torch.randn(16, 6)
        for fwd, opt, inp in ((compiled, opts[0], x), (ref, opts[1], x.to(dev))):
            opt.zero_grad()
            fwd(inp).pow(2).mean().backward()
            opt.step()
        torch_xla.sync()
    assert int(model[1].num_batches_tracked) == int(ref[1].num_batches_tracked.cpu()) == 4
    for name in ("running_mean", "running_var"):
        torch.testing.assert_close(getattr(model[1], name), getattr(ref[1], name).cpu(), rtol=1e-5, atol=1e-6)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach(), q.detach().cpu(), rtol=1e-5, atol=1e-6)


def test_zero_dim_arguments_are_not_frozen_at_trace_time() -> None:
    class M(torch.nn.Module):
        def forward(self, x, s):
            return x * s

    graph = NeuronFxGraph(torch.fx.symbolic_trace(M()))
    x = torch.ones(3)
    for s in (0.0, 1.0, 2.5, 0.0):
        torch.testing.assert_close(graph(x, torch.tensor(s)), x * s)
    assert graph.trace_count == 1


def test_graphs_are_dumped_under_torch_xla_s_graph_name(tmp_path, monkeypatch) -> None:
    """NEURON_FRAMEWORK_DEBUG dumps of compiled FX graphs are SyncTensorsGraph.<n>.*, as torch_xla
    names its graphs (LoweringContext's default was PyLoweringContext.<n>)."""
    from neuron_customcall import backend

    monkeypatch.setenv("NEURON_FRAMEWORK_DEBUG", "1")
    monkeypatch.setenv("NEURON_FRAMEWORK_DEBUG_DIR", str(tmp_path))
    backend.clear_memo()
    torch._dynamo.reset()
    f = torch.compile(lambda x: torch.sin(x) * 3 - 1, backend="neuron")
    x = torch.linspace(-1, 1, 24).reshape(4, 6)
    torch.testing.assert_close(f(x), torch.sin(x) * 3 - 1)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names and all(n.startswith("SyncTensorsGraph.") for n in names), names
