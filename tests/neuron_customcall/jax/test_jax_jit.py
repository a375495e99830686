"""neuron_customcall.jax.jit against jax.jit: same results for pytrees, static and dropped
arguments, scalars, closures and donation; one trace per signature (and a new one whenever
jax.jit makes one); outputs as jax.device_put makes them; MLP training parity."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import neuron_customcall.jax as nj
from neuron_customcall.jax.jit import plugin_device


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
    """Donated inputs stay readable on the direct path (the emulator returns fresh arrays); on
    the neuron device nj.jit is jax.jit, which consumes them as on XLA:CPU."""
    def step(state, g):
        return jax.tree_util.tree_map(lambda s, d: s - 0.1 * d, state, g)

    state = {"a": jnp.ones(4), "b": jnp.zeros((2, 2))}
    grads = {"a": jnp.full(4, 2.0), "b": jnp.ones((2, 2))}
    want = jax.jit(step)(state, grads)
    out = nj.jit(step, donate_argnums=0)(state, grads)
    _assert_trees_close(out, want)
    np.testing.assert_array_equal(np.asarray(grads["a"]), 2.0)
    assert state["a"].is_deleted() == (plugin_device() is not None)


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


def test_closed_over_constants_are_cached_per_function_object_as_jax_does() -> None:
    # jax.jit keeps a function's traces while it lives: a rebound closure variable is not seen
    # (the documented impurity caveat); a new function object over other constants is traced anew.
    for jit in (jax.jit, nj.jit):
        c = 1.0
        f = jit(lambda x: x + c)
        first = np.asarray(f(jnp.ones(2)))
        c = 2.0
        np.testing.assert_array_equal(np.asarray(f(jnp.ones(2))), first)

    def make(jit, w):
        return jit(lambda x: x * w + 1)

    x = np.ones(4, np.float32)
    for w in (jnp.arange(4.0), jnp.arange(4.0) + 10, np.full(4, -1.5, np.float32), 3.0, 4.0):
        got, want = make(nj.jit, w)(x), make(jax.jit, w)(x)
        _assert_trees_close(got, want, rtol=0, atol=0)
        got2 = make(nj.jit, w)(x)  # the executable may be shared; the hoisted constants are not
        np.testing.assert_array_equal(np.asarray(got2), np.asarray(want))


def test_cached_signatures_retrace_on_shape_dtype_weak_type_and_static_changes() -> None:
    def f(x, y, k):
        return x * y + k

    ours, ref = nj.jit(f, static_argnums=2), jax.jit(f, static_argnums=2)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    calls = [(a, a, 1), (a, a, 1), (a, a, 2), (a[:1], a[:1], 2), (a.astype(np.int32), a.astype(np.int32), 2),
             (a, 2.0, 2), (a, 2, 2), (a, jnp.float32(2), 2), (jnp.asarray(a), jnp.asarray(a), 2), (a, a, 1)]
    for args in calls:
        got, want = ours(*args), ref(*args)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert ours.trace_count == 7  # the repeated (a, a, 1), and jnp.asarray(a) like a, reuse traces


def test_outputs_are_jax_arrays_as_device_put_makes_them_and_do_not_alias_inputs() -> None:
    f = nj.jit(lambda x, y: {"same": x, "double": y * 2, "flag": x > 1, "n": jnp.sum(y > 0)})
    x = np.arange(256 * 1024, dtype=np.float32).reshape(256, 1024)  # large: jax takes such arrays over
    y = jnp.asarray(x)
    out = f(x, y)
    for leaf in jax.tree_util.tree_leaves(out):
        like = jax.device_put(np.asarray(leaf))
        assert isinstance(leaf, jax.Array)
        assert (leaf.dtype, leaf.shape, leaf.weak_type, leaf.committed, leaf.sharding) == \
            (like.dtype, like.shape, like.weak_type, like.committed, like.sharding)
    want = jax.jit(lambda x, y: {"same": x, "double": y * 2, "flag": x > 1, "n": jnp.sum(y > 0)})(x, y)
    for got, ref in zip(jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(want)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(ref))
    x[:] = -1  # the caller's NumPy input changes; the results do not
    np.testing.assert_array_equal(np.asarray(out["same"]), np.asarray(want["same"]))
    assert (out["same"] + 0).sum() == want["same"].sum()


def test_64_bit_outputs() -> None:
    with jax.enable_x64(True):
        f = nj.jit(lambda x, n: (x * 2, n + 1))
        got = f(np.arange(3, dtype=np.float64), np.arange(3, dtype=np.int64))
        assert [g.dtype for g in got] == [np.float64, np.int64]
        np.testing.assert_array_equal(np.asarray(got[0]), [0, 2, 4])
        np.testing.assert_array_equal(np.asarray(got[1]), [1, 2, 3])


def test_a_wrong_call_is_as_clear_as_jax_jit_after_cached_calls() -> None:
    ours, ref = nj.jit(lambda x, y: x @ y), jax.jit(lambda x, y: x @ y)
    a = np.ones((2, 3), np.float32)
    ours(a, a.T)
    for bad in [(a, a), (a,)]:
        with pytest.raises(TypeError) as want:
            ref(*bad)
        with pytest.raises(TypeError) as got:
            ours(*bad)
        assert str(got.value) == str(want.value)


def test_outputs_follow_jax_default_device() -> None:
    f = nj.jit(lambda x: x + 1)
    x = np.ones(3, np.float32)
    device = jax.devices()[-1]
    with jax.default_device(device):
        got, like = f(x), jax.device_put(np.ones(3, np.float32))
    assert got.sharding == like.sharding and got.committed == like.committed
    assert f(x).sharding == jax.device_put(x).sharding


def test_outputs_sharing_memory_in_the_emulator_are_right_as_jax_arrays() -> None:
    def f(x, y):
        z = x * 2
        return z, z, x, jnp.zeros_like(y), y.reshape(-1), jnp.broadcast_to(x[0], (3, 4))

    x = np.arange(4, dtype=np.float32)
    y = jnp.arange(6, dtype=jnp.float32).reshape(2, 3)
    got, want = nj.jit(f)(x, y), jax.jit(f)(x, y)
    _assert_trees_close(got, want, rtol=0, atol=0)
    x[:] = 100  # the writeable NumPy input changes; no result does
    _assert_trees_close(got, want, rtol=0, atol=0)


def test_outputs_of_narrow_and_special_dtypes() -> None:
    def f(x):
        return (x.astype(jnp.bfloat16) * 3, x.astype(jnp.float16) / 2, x.astype(jnp.int8) - 1,
                x.astype(jnp.uint32) + 1, jnp.float32(0) * x.sum(), x.reshape(2, 3).T)

    x = np.arange(6, dtype=np.float32)
    got, want = nj.jit(f)(x), jax.jit(f)(x)
    _assert_trees_close(got, want, rtol=0, atol=0)
    for g in got:
        assert g.dtype == np.asarray(g).dtype
