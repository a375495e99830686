"""torch_xla lazy graphs executed on the emulator: a training loop materialised with our
mark_step ends where torch_xla's own sync on its PJRT CPU device ends; to_cpu; mark_step()."""
from __future__ import annotations

import pytest
import torch
import torch_xla

from neuron_customcall.torch_xla import mark_step, to_cpu
from tests.neuron_customcall.torch_xla.mlp_training import batch, clone_to, make_mlp, train

_X = torch_xla._XLAC


def _params(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().cpu() for p in model.parameters()]


def _train_on_xla(sync, momentum: float = 0.0, steps: int = 10):
    dev = torch_xla.device()
    model = clone_to(make_mlp(), dev)
    x, y = (t.to(dev) for t in batch())
    losses = train(model, x, y, steps, sync, momentum=momentum)
    return model, losses


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_sgd_training_matches_torch_xla_on_pjrt_cpu(momentum: float) -> None:
    ref_model, ref_losses = _train_on_xla(lambda *state: torch_xla.sync(), momentum=momentum)
    model, losses = _train_on_xla(lambda model, opt, loss: mark_step(model, opt, loss), momentum=momentum)
    for p, q in zip(_params(model), _params(ref_model)):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(torch.stack([l.detach().cpu() for l in losses]),
                               torch.stack([l.detach().cpu() for l in ref_losses]), rtol=1e-4, atol=1e-5)
    assert float(losses[-1].detach().cpu()) < float(losses[0].detach().cpu())


def test_results_are_device_data_so_the_next_graph_starts_from_them() -> None:
    model, _ = _train_on_xla(lambda model, opt, loss: mark_step(model, opt, loss), momentum=0.9, steps=2)
    for p in model.parameters():
        assert not _X._check_tensor_need_materialization([p])[0]
        assert "device_data" in _X._get_xla_tensors_text([p])


def test_mark_step_without_sources_finds_live_tensors() -> None:
    ref_model, _ = _train_on_xla(lambda *state: torch_xla.sync(), steps=3)
    model, _ = _train_on_xla(lambda *state: mark_step(), steps=3)
    for p, q in zip(_params(model), _params(ref_model)):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
    model, _ = _train_on_xla(lambda *state: mark_step(tensors=None), steps=3)
    for p, q in zip(_params(model), _params(ref_model)):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)


def test_to_cpu_and_nothing_pending() -> None:
    dev = torch_xla.device()
    a = torch.arange(6, dtype=torch.float32).reshape(2, 3).to(dev)
    b = (a * 2 + 1).sum(0)
    out = to_cpu(b)
    assert out.device.type == "cpu"
    torch.testing.assert_close(out, torch.tensor([8.0, 12.0, 16.0]))
    assert not _X._check_tensor_need_materialization([b])[0]
    assert mark_step(b) == 0 and mark_step(tensors=[b]) == 0
    torch.testing.assert_close(to_cpu(b), out)  # already device data: a plain copy
    c = b.to(torch.bfloat16) * 3
    torch.testing.assert_close(to_cpu(c), (out * 3).to(torch.bfloat16))


def test_mixing_with_torch_xla_sync_waits_for_its_asynchronous_results() -> None:
    # torch_xla.sync() returns before its buffers exist; reading them unwaited crashed the process.
    dev = torch_xla.device()
    w = torch.zeros(4, device=dev)
    torch_xla.sync()
    w[1:3] += 5
    assert mark_step(w) == 1
    torch.testing.assert_close(w.cpu(), torch.tensor([0.0, 5.0, 5.0, 0.0]))


def test_views_and_their_base_are_written_back_consistently() -> None:
    dev = torch_xla.device()
    a = torch.arange(12, dtype=torch.float32).reshape(3, 4).to(dev) * 2
    row = a[1]
    row.mul_(10)  # an in-place update of the base through a view
    assert mark_step(row) == 2  # the base comes along with its view
    for t in (a, row):
        assert not _X._check_tensor_need_materialization([t])[0]
    expected = torch.arange(12, dtype=torch.float32).reshape(3, 4) * 2
    expected[1] *= 10
    torch.testing.assert_close(a.cpu(), expected)
    torch.testing.assert_close(row.cpu(), expected[1])
    torch.testing.assert_close(to_cpu(a.t()[1]), expected[:, 1])  # a new view of the new base


def test_live_tensors_skip_tracing_artefacts_that_cannot_be_inspected():
    """FakeTensors left behind by torch.compile/export raise on attribute access; the walk over
    every live object must not trip over them."""
    import torch
    import torch_xla
    from torch._subclasses.fake_tensor import FakeTensorMode

    from neuron_customcall.torch_xla.lazy import live_tensors

    with FakeTensorMode():
        fake = torch.empty(3)
    del fake.fake_mode  # what a torn-down trace leaves: reading attributes now raises
    x = torch.ones(2, device=torch_xla.device()) * 3
    found = live_tensors()
    assert any(t is x for t in found)
