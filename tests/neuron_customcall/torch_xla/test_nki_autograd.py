"""NKI kernels in graphs whose inputs require grad (issue 17): inference works, eagerly and under
torch.compile (AOTAutograd traces the backward of such graphs, which failed for want of an
autograd formula), and a gradient really taken through a kernel is an error naming the kernel,
never a silent zero. A tensor made inside the compiled function joins the XLA arguments."""
from __future__ import annotations

import pytest
import torch
import torch_xla

import neuron_customcall.torch_xla  # noqa: F401  (registers neuron::nki_call and the backend)
from neuron_customcall.torch_xla import to_cpu
from tests.neuron_customcall.kernels.seed_kernels import nki_tensor_add

NO_BACKWARD = r"NKI kernel 'nki_tensor_add_kernel_' has no backward"


class _Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(-1, 1, 256 * 1024).reshape(256, 1024))

    def forward(self, a):
        return nki_tensor_add(a, self.w) * 2.0


def _a() -> torch.Tensor:
    return torch.rand(256, 1024, generator=torch.Generator().manual_seed(0))


def test_inference_with_trainable_parameters_eager_and_compiled() -> None:
    model, a = _Model(), _a()
    expected = (a + model.w.detach()) * 2.0
    torch.testing.assert_close(model(a).detach(), expected)
    torch._dynamo.reset()
    out = torch.compile(model, backend="neuron")(a)
    torch.testing.assert_close(out.detach(), expected)


def test_a_gradient_through_a_kernel_is_an_error_naming_it() -> None:
    model, a = _Model(), _a()
    with pytest.raises(NotImplementedError, match=NO_BACKWARD):
        model(a).sum().backward()
    assert model.w.grad is None
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="neuron")
    with pytest.raises(Exception, match=NO_BACKWARD):
        compiled(a).sum().backward()
    assert model.w.grad is None


def test_on_xla_a_gradient_through_a_kernel_is_an_error_too() -> None:
    dev = torch_xla.device()
    w = torch.ones(256, 1024, device=dev, requires_grad=True)
    out = nki_tensor_add(_a().to(dev), w)
    torch.testing.assert_close(to_cpu(out.detach()), _a() + 1)
    with pytest.raises(NotImplementedError, match=NO_BACKWARD):
        out.sum().backward()


def test_a_tensor_made_inside_the_compiled_function_reaches_the_kernel() -> None:
    torch._dynamo.reset()
    f = torch.compile(lambda x: nki_tensor_add(x, torch.full((256, 1024), 0.5)) * x, backend="neuron",
                      fullgraph=True)
    a = _a()
    torch.testing.assert_close(f(a), (a + 0.5) * a)
