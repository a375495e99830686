"""The tutorials' multi-layer perceptron: three linear layers, ReLU between them, log-softmax.

The activation is a parameter (the C++ custom op or torch.relu) so that one definition serves the
emulator run and the CPU reference, and the performance example reuses it with wider layers.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

Activation = Callable[[torch.Tensor], torch.Tensor]


class MLP(nn.Module):
    def __init__(self, activation: Activation, input_size: int = 28 * 28, output_size: int = 10,
                 layers: Sequence[int] = (120, 84)) -> None:
        super().__init__()
        self.activation = activation
        self.fc1 = nn.Linear(input_size, layers[0])
        self.fc2 = nn.Linear(layers[0], layers[1])
        self.fc3 = nn.Linear(layers[1], output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r1 = self.activation(self.fc1(x))
        r2 = self.activation(self.fc2(r1))
        return torch.log_softmax(self.fc3(r2), dim=1)
