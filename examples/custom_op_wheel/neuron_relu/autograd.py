"""relu(x) as a torch.autograd.Function over the library's forward and backward ops.

The backward op needs the forward's input (the gradient passes where it was positive), so the
Function saves it. Both ops have fake kernels from their shape functions, so torch.compile traces
the forward and the backward graph without running the emulator.
"""
from __future__ import annotations

from typing import Any

import torch


class ReLU(torch.autograd.Function):
    """max(x, 0) on the GpSimd engine; the gradient passes where x > 0."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return torch.ops.neuron_relu.relu_forward(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return torch.ops.neuron_relu.relu_backward(grad.contiguous(), x)


def relu(x: torch.Tensor) -> torch.Tensor:
    """Rectified linear unit of a float32 tensor of any shape (the kernels read float32)."""
    if x.dtype != torch.float32:
        raise TypeError(f"neuron_relu.relu takes float32 tensors, not {x.dtype}")
    return ReLU.apply(x)
