"""The JAX MLP both XLA:CPU comparisons run (mlp_vs_xla_cpu.py through our compiler directly,
pjrt_jax_vs_cpu.py through plain jax.jit on the neuron device): one definition, so the two
benchmarks measure the same model."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def params(sizes: tuple[int, ...], seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """(weight, bias) per layer, weights scaled by 1/sqrt(fan-in)."""
    rng = np.random.default_rng(seed)
    return [((rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32), np.zeros(n, np.float32))
            for m, n in zip(sizes[:-1], sizes[1:])]


def batch(sizes: tuple[int, ...], n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Inputs and one-hot labels of `n` examples."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, sizes[0])).astype(np.float32)
    y = np.eye(sizes[-1], dtype=np.float32)[rng.integers(0, sizes[-1], n)]
    return x, y


def functions() -> tuple[Callable[..., Any], Callable[..., Any]]:
    """(infer, train_step), not jitted: softmax of the ReLU MLP, and one SGD step (lr 0.01) on
    its cross-entropy returning (new params, loss)."""
    import jax

    forward, loss = _model()

    def infer(ps, x):
        return jax.nn.softmax(forward(ps, x))

    def train_step(ps, x, y):
        value, grads = jax.value_and_grad(loss)(ps, x, y)
        return sgd(ps, grads), value

    return infer, train_step


def loss_function() -> Callable[..., Any]:
    """The cross-entropy train_step differentiates, (params, x, one-hot y) -> scalar."""
    return _model()[1]


def sgd(ps: Any, grads: Any) -> Any:
    """train_step's update: p - 0.01 * g."""
    import jax

    return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, ps, grads)


def _model() -> tuple[Callable[..., Any], Callable[..., Any]]:
    import jax
    import jax.numpy as jnp

    def forward(ps, x):
        h = x
        for w, b in ps[:-1]:
            h = jax.nn.relu(h @ w + b)
        w, b = ps[-1]
        return h @ w + b

    def loss(ps, x, y):
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(forward(ps, x)) * y, axis=-1))

    return forward, loss
