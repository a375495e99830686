"""Differential tests of whole JAX training steps (the issue's workloads) against XLA:CPU: MLP with
SGD and with Adam, softmax cross-entropy, a layer-normed attention block's gradient, a small CNN
step with max pooling, and an embedding + scan language-model step."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from tests.neuron_customcall.compiler.ours import CASE_ARGS, case, check_case, rand


def _xent(logits, labels):
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], axis=1))


def _mlp(params, x):
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def _sgd_step(params, x, y):
    loss, g = jax.value_and_grad(lambda p: _xent(_mlp(p, x), y))(params)
    return loss, jax.tree_util.tree_map(lambda p, d: p - 0.1 * d, params, g)


def _adam_step(params, m, v, x, y):
    g = jax.grad(lambda p: _xent(_mlp(p, x), y))(params)
    m = jax.tree_util.tree_map(lambda a, b: 0.9 * a + 0.1 * b, m, g)
    v = jax.tree_util.tree_map(lambda a, b: 0.999 * a + 0.001 * b * b, v, g)
    upd = jax.tree_util.tree_map(lambda a, b: a / (1 - 0.9) / (jnp.sqrt(b / (1 - 0.999)) + 1e-8), m, v)
    return jax.tree_util.tree_map(lambda p, u: p - 1e-3 * u, params, upd), m, v


def _layer_norm(x, g, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * lax.rsqrt(var + 1e-5) * g + b


def _block(p, x):
    h = _layer_norm(x, p["g"], p["b"])
    q, k, v = h @ p["wq"], h @ p["wk"], h @ p["wv"]
    s = jnp.einsum("btd,bsd->bts", q, k) / np.sqrt(q.shape[-1])
    s = jnp.where(jnp.tril(jnp.ones(s.shape[-2:], bool)), s, -1e9)
    return x + jax.nn.softmax(s, -1) @ v @ p["wo"]


def _cnn_step(k1, k2, w, x, y):
    def loss(k1, k2, w):
        h = jax.nn.relu(lax.conv_general_dilated(x, k1, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
        h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        h = jax.nn.relu(lax.conv_general_dilated(h, k2, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
        return _xent(h.mean((1, 2)) @ w, y)
    return jax.value_and_grad(loss, argnums=(0, 1, 2))(k1, k2, w)


def _lm_step(emb, w, tokens):
    def loss(emb, w):
        xs = emb[tokens]  # (T, d)
        hs = lax.scan(lambda h, x: ((lambda n: (n, n))(jnp.tanh(h @ w + x))), jnp.zeros(w.shape[0]), xs)[1]
        return _xent(hs[:-1] @ emb.T, tokens[1:])
    return jax.value_and_grad(loss, argnums=(0, 1))(emb, w)


def _params(sizes, seed=0):
    return [(rand(m, n, seed=seed + k) / np.float32(np.sqrt(m)), rand(n, seed=seed + 50 + k) * 0.1)
            for k, (m, n) in enumerate(zip(sizes[:-1], sizes[1:]))]


P = _params((12, 32, 16, 5))
X, Y = rand(8, 12, seed=9), np.array([0, 1, 2, 3, 4, 0, 1, 2], np.int32)
ZEROS = [(np.zeros_like(w), np.zeros_like(b)) for w, b in P]
BLOCK = {"g": np.ones(16, np.float32), "b": np.zeros(16, np.float32),
         **{k: rand(16, 16, seed=s) * 0.25 for s, k in enumerate(("wq", "wk", "wv", "wo"))}}

MODELS = [
    case("mlp_sgd_step", _sgd_step, P, X, Y),
    case("mlp_adam_step", _adam_step, P, ZEROS, ZEROS, X, Y),
    case("mlp_inference_softmax", lambda p, x: jax.nn.softmax(_mlp(p, x)), P, X),
    case("attention_block_grad", jax.grad(lambda p, x: (_block(p, x) ** 2).mean()), BLOCK, rand(2, 6, 16, seed=3)),
    case("cnn_step", _cnn_step, rand(3, 3, 3, 8) * 0.3, rand(3, 3, 8, 8, seed=1) * 0.2, rand(8, 4, seed=2),
         rand(4, 8, 8, 3, seed=3), np.array([0, 1, 2, 3], np.int32)),
    case("embedding_scan_lm_step", _lm_step, rand(11, 8) * 0.5, rand(8, 8, seed=1) * 0.3,
         np.array([1, 4, 2, 9, 3, 3, 0, 7], np.int32)),
]


@pytest.mark.parametrize(CASE_ARGS, MODELS)
def test_training_steps_match_xla_cpu(f, args, x64, rtol, atol):
    check_case(f, args, x64, 1e-4 if rtol is None else rtol, 1e-4 if atol is None else atol)
