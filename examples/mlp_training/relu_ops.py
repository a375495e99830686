"""The C++ ReLU as a torch autograd function, as the training tutorial's ``my_ops.py``.

Why a separate module: the model takes its activation as an argument, so the same MLP trains with
this custom op on the emulator and with ``torch.relu`` on the CPU (the reference run).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import torch

from neuron_customcall import custom_op

HERE = Path(__file__).resolve().parent


def build(build_directory: str | os.PathLike[str] | None = None) -> Path:
    """Builds (or reuses the cached objects of) librelu.so and registers torch.ops.my_ops.*."""
    directory = build_directory or Path(tempfile.gettempdir()) / f"neuron_customcall_examples_{os.getuid()}" / "relu"
    return custom_op.load(name="relu", compute_srcs=[HERE / "relu.cpp"], shape_srcs=[HERE / "shape.cpp"],
                          build_directory=directory)


class Relu(torch.autograd.Function):
    """Forward and backward are custom ops: on XLA tensors each becomes one custom-call."""

    @staticmethod
    def forward(ctx, input: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(input)
        return torch.ops.my_ops.relu_forward(input)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (input,) = ctx.saved_tensors
        return torch.ops.my_ops.relu_backward(grad, input)


def relu(x: torch.Tensor) -> torch.Tensor:
    return Relu.apply(x)
