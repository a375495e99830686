"""The MLP and training loop shared by the torch_xla tests: one definition, several executors."""
from __future__ import annotations

import copy
from collections.abc import Callable

import torch


def make_mlp(sizes: tuple[int, ...] = (32, 64, 48, 10), seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    layers: list[torch.nn.Module] = []
    for k, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(torch.nn.Linear(m, n))
        if k < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def batch(n: int = 16, features: int = 32, classes: int = 10, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, features, generator=g), torch.randint(0, classes, (n,), generator=g)


def train(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int,
          after_step: Callable[[torch.nn.Module, torch.optim.Optimizer, torch.Tensor], None],
          forward: Callable[[torch.Tensor], torch.Tensor] | None = None, momentum: float = 0.0) -> list[torch.Tensor]:
    """`steps` SGD steps; `after_step(model, optimizer, loss)` materialises (mark_step, sync, ...).
    Returns the losses (as the tensors the loop produced)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=momentum)
    fwd = forward or model
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(fwd(x), y)
        loss.backward()
        opt.step()
        after_step(model, opt, loss)
        losses.append(loss)
    return losses


def clone_to(model: torch.nn.Module, device: torch.device | str) -> torch.nn.Module:
    return copy.deepcopy(model).to(device)
