"""`differentiable` pairs a function calling NKI kernels with a backward (issue 17): gradients
match PyTorch's own on the CPU, on the XLA device and under torch.compile(fullgraph=True);
non-tensor arguments and several outputs are handled; a backward that returns the wrong
gradients is an error naming the function."""
from __future__ import annotations

import pytest
import torch
import torch_xla

from neuron_customcall.torch_xla import Saved, differentiable, mark_step, to_cpu
from tests.neuron_customcall.kernels.seed_kernels import nki_tensor_add, scale_and_shift


def _add_backward(saved: Saved, grad: torch.Tensor):
    a, b = saved.inputs
    assert isinstance(saved.output, torch.Tensor) and saved.output.shape == a.shape
    return grad, grad


@differentiable(_add_backward)
def add(a, b):
    return nki_tensor_add(a, b)


def _inputs():
    g = torch.Generator().manual_seed(1)
    return torch.randn(256, 1024, generator=g), torch.randn(256, 1024, generator=g)


def _reference_grads(a, b):
    a, b = a.clone().requires_grad_(), b.clone().requires_grad_()
    (a * b * (a + b)).sum().backward()
    return a.grad, b.grad


def _grads(f, a, b, device=None):
    a = (a.to(device) if device else a).detach().requires_grad_()
    b = (b.to(device) if device else b).detach().requires_grad_()
    f(a, b).sum().backward()
    return a.grad, b.grad


def test_gradients_through_a_kernel_match_pytorch_on_cpu() -> None:
    a, b = _inputs()
    got = _grads(lambda x, y: x * y * add(x, y), a, b)
    for g, want in zip(got, _reference_grads(a, b)):
        torch.testing.assert_close(g, want)


def test_on_the_xla_device() -> None:
    a, b = _inputs()
    ga, gb = _grads(lambda x, y: x * y * add(x, y), a, b, torch_xla.device())
    mark_step(ga, gb)
    for g, want in zip((to_cpu(ga), to_cpu(gb)), _reference_grads(a, b)):
        torch.testing.assert_close(g, want)


def test_under_torch_compile_fullgraph() -> None:
    torch._dynamo.reset()
    a, b = _inputs()
    f = torch.compile(lambda x, y: x * y * add(x, y), backend="neuron", fullgraph=True)
    for g, want in zip(_grads(f, a, b), _reference_grads(a, b)):
        torch.testing.assert_close(g, want)


def _scale_backward(saved: Saved, dy, dz):
    x, factor, shift = saved.inputs
    y, z = saved.output
    return dy * factor + dz, None, None


@differentiable(_scale_backward)
def scale(x, factor, shift):
    return scale_and_shift(x, factor, shift)


def test_static_arguments_and_two_outputs() -> None:
    x = torch.linspace(-1, 1, 128 * 64).reshape(128, 64).requires_grad_()
    y, z = scale(x, 3.0, 0.5)
    torch.testing.assert_close(y.detach(), x.detach() * 3.0)
    (y.sum() + (z * z).sum()).backward()
    torch.testing.assert_close(x.grad, torch.full_like(x, 3.0) + 2 * (x.detach() + 0.5))


def test_a_backward_with_the_wrong_gradients_is_named() -> None:
    a, b = _inputs()
    one = differentiable(lambda saved, g: g)(lambda x, y: nki_tensor_add(x, y))
    with pytest.raises(TypeError, match=r"differentiable <lambda>: the backward returned 1 gradient\(s\) "
                                        r"for 2 argument\(s\)"):
        _grads(one, a, b)

    def bad_shape(saved, g):
        return g[:1], g

    @differentiable(bad_shape)
    def add2(x, y):
        return nki_tensor_add(x, y)

    with pytest.raises(TypeError, match=r"differentiable add2: gradient 0 must be None or a tensor of the "
                                        r"argument's shape \[256, 1024\], got \[1, 1024\]"):
        _grads(add2, a, b)


def test_a_forward_that_returns_no_tensor_is_named() -> None:
    f = differentiable(lambda saved, g: (g,))(lambda x: 3)
    with pytest.raises(TypeError, match="the forward must return a tensor or a tuple of tensors, got int"):
        f(torch.ones(2, requires_grad=True))
