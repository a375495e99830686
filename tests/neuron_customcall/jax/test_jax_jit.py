"""neuron_customcall.jax.jit against jax.jit: same results for pytrees, static and dropped
arguments, scalars, closures and donation; one trace per signature; MLP training parity."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import neuron_customcall.jax as nj


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _assert_trees_close(got, want, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    got_leaves, got_tree = jax.tree_util.tree_flatten(got)
    want_leaves, want_tree = jax.tree_util.tree_flatten(want)
    assert got_tree == want_tree
    for g, w in zip(got_leaves, want_leaves):
        assert isinstance(g, jax.Array)
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol)


def test_pytrees_static_arguments_and_kwargs() -> None:
    def f(params, x, mode, *, scale):
        y = jnp.tanh(x @ params["w"] + params["b"]) * scale
        out = {"y": y, "stats": (y.sum(), jnp.max(y, axis=0))}
        if mode == "double":
            out["twice"] = 2 * y
        return out

    params = {"w": _rng().standard_normal((5, 3)).astype(np.float32), "b": np.ones(3, np.float32)}
    x = _rng(1).standard_normal((4, 5)).astype(np.float32)
    ours = nj.jit(f, static_argnums=2, static_argnames="scale")
    ref = jax.jit(f, static_argnums=2, static_argnames="scale")
    for mode in ("single", "double"):
        _assert_trees_close(ours(params, x, mode, scale=0.5), ref(params, x, mode, scale=0.5))
    assert ours.trace_count == 2


def test_negative_static_argnums() -> None:
    def f(x, n):
        return x ** n

    x = np.arange(4, dtype=np.float32)
    _assert_trees_close(nj.jit(f, static_argnums=-1)(x, 3), jax.jit(f, static_argnums=-1)(x, 3))


def test_one_trace_per_signature() -> None:
    ours = nj.jit(lambda x, y: x * y + 1)
    a = np.ones((2, 3), np.float32)
    for _ in range(3):
        ours(a, a)
    assert ours.trace_count == 1
    ours(np.ones((4,), np.float32), np.ones((4,), np.float32))
    ours(a.astype(np.int32), a.astype(np.int32))
    assert ours.trace_count == 3
    np.testing.assert_array_equal(np.asarray(ours(a.astype(np.int32), 2 * a.astype(np.int32))), 3)


def test_unused_arguments_are_dropped_like_jax_does() -> None:
    def f(unused, x, also_unused):
        return x * 3

    out = nj.jit(f)(np.zeros(7, np.float32), np.arange(4, dtype=np.float32), {"z": np.ones(2)})
    np.testing.assert_array_equal(np.asarray(out), np.arange(4) * 3)


def test_python_scalars_and_closed_over_constants() -> None:
    table = jnp.arange(6.0, dtype=jnp.float32).reshape(2, 3)

    def f(x, s):
        return x * s + table

    x = np.ones((2, 3), np.float32)
    _assert_trees_close(nj.jit(f)(x, 2.5), jax.jit(f)(x, 2.5))
    _assert_trees_close(nj.jit(f)(jnp.asarray(x), 3), jax.jit(f)(jnp.asarray(x), 3))


def test_donation_is_accepted_and_inputs_stay_readable() -> None:
    def step(state, g):
        return jax.tree_util.tree_map(lambda s, d: s - 0.1 * d, state, g)

    state = {"a": jnp.ones(4), "b": jnp.zeros((2, 2))}
    grads = {"a": jnp.full(4, 2.0), "b": jnp.ones((2, 2))}
    out = nj.jit(step, donate_argnums=0)(state, grads)
    _assert_trees_close(out, jax.jit(step)(state, grads))
    np.testing.assert_array_equal(np.asarray(grads["a"]), 2.0)


def test_decorator_forms() -> None:
    @nj.jit
    def f(x):
        return x + 1

    @nj.jit(static_argnames=("n",))
    def g(x, n):
        return x * n

    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(f(x)), x + 1)
    np.testing.assert_array_equal(np.asarray(g(x, n=4)), x * 4)
    assert f.__name__ == "f"


# -- training parity --------------------------------------------------------------------------
def _mlp_init(sizes: tuple[int, ...], seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = _rng(seed)
    return [{"w": (rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32), "b": np.zeros(n, np.float32)}
            for m, n in zip(sizes[:-1], sizes[1:])]


def _loss(params, x, y):
    h = x
    for layer in params[:-1]:
        h = jax.nn.relu(h @ layer["w"] + layer["b"])
    logits = h @ params[-1]["w"] + params[-1]["b"]
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=-1))


def _sgd_step(params, x, y, lr):
    loss, grads = jax.value_and_grad(_loss)(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss


def test_mlp_sgd_training_matches_xla_cpu() -> None:
    rng = _rng(3)
    x = rng.standard_normal((16, 32)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 16)]
    ours, ref = nj.jit(_sgd_step, static_argnums=3), jax.jit(_sgd_step, static_argnums=3)
    p_ours = p_ref = jax.tree_util.tree_map(jnp.asarray, _mlp_init((32, 64, 48, 10)))
    losses = []
    for _ in range(10):
        p_ours, loss_ours = ours(p_ours, x, y, 0.1)
        p_ref, loss_ref = ref(p_ref, x, y, 0.1)
        losses.append(float(loss_ours))
        np.testing.assert_allclose(float(loss_ours), float(loss_ref), rtol=1e-5)
    _assert_trees_close(p_ours, p_ref, rtol=1e-4, atol=1e-5)
    assert losses[-1] < losses[0]
    assert ours.trace_count == 1
