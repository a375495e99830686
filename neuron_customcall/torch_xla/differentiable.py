"""Pairing a forward kernel with its backward: `differentiable` turns a function that calls NKI
kernels (or C++ ops) into one torch autograd can differentiate, with a backward you write.

Why a helper: a kernel has no derivative torch could compute, so a gradient through
`kernel[grid](...)` is an error naming the kernel (custom_call.py). The way out the NKI guide
shows is a `torch.autograd.Function` whose forward and backward call kernels; this writes that
class once, the same way each time (inputs and outputs saved for the backward, non-tensor
arguments kept aside, one gradient per argument checked), so that it works eagerly, on the XLA
device and under `torch.compile(fullgraph=True)` alike. JAX's counterpart is `jax.custom_vjp`.

    def add_backward(saved, grad):
        return grad, grad            # d(a + b)/da, d(a + b)/db

    @differentiable(add_backward)
    def add(a, b):
        return add_kernel[2, 2](a, b)
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import torch


class Saved(NamedTuple):
    """What a backward receives: the forward's arguments and its result (a tensor or a tuple of
    them), as they were when the forward ran."""

    inputs: tuple
    output: Any


def differentiable(backward: Callable[..., Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: the decorated forward runs as is; its gradient is `backward(saved, *grads)`,
    with `saved` a `Saved` and one gradient per forward output, returning one gradient per
    forward argument (a tensor, or None for an argument that is not a tensor or needs none)."""

    def wrap(forward: Callable[..., Any]) -> Callable[..., Any]:
        name = getattr(forward, "__name__", "forward")

        class Function(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, *args: Any) -> Any:
                out = forward(*args)
                outs = out if isinstance(out, tuple) else (out,)
                if not outs or not all(isinstance(o, torch.Tensor) for o in outs):
                    raise TypeError(f"differentiable {name}: the forward must return a tensor or a "
                                    f"tuple of tensors, got {type(out).__name__}")
                tensors = [a for a in args if isinstance(a, torch.Tensor)]
                ctx.save_for_backward(*tensors, *outs)
                ctx.layout = (tuple(isinstance(a, torch.Tensor) for a in args),
                              tuple(None if isinstance(a, torch.Tensor) else a for a in args),
                              isinstance(out, tuple))
                return out

            @staticmethod
            def backward(ctx: Any, *grads: Any) -> Any:
                is_tensor, constants, tupled = ctx.layout
                saved = list(ctx.saved_tensors)
                n_in = sum(is_tensor)
                it = iter(saved[:n_in])
                inputs = tuple(next(it) if t else c for t, c in zip(is_tensor, constants))
                outputs = tuple(saved[n_in:])
                result = backward(Saved(inputs, outputs if tupled else outputs[0]), *grads)
                result = result if isinstance(result, tuple) else (result,)
                if len(result) != len(inputs):
                    raise TypeError(f"differentiable {name}: the backward returned {len(result)} "
                                    f"gradient(s) for {len(inputs)} argument(s)")
                for k, (g, x) in enumerate(zip(result, inputs)):
                    if g is not None and (not isinstance(x, torch.Tensor) or not isinstance(g, torch.Tensor)
                                          or tuple(g.shape) != tuple(x.shape)):
                        raise TypeError(f"differentiable {name}: gradient {k} must be None or a tensor "
                                        f"of the argument's shape {_shape(x)}, got {_shape(g)}")
                return result

        Function.__name__ = Function.__qualname__ = f"{name}_function"

        @functools.wraps(forward)
        def call(*args: Any) -> Any:
            return Function.apply(*args)

        call.function = Function  # type: ignore[attr-defined]
        return call

    return wrap


def _shape(x: Any) -> str:
    return str(list(x.shape)) if isinstance(x, torch.Tensor) else type(x).__name__
