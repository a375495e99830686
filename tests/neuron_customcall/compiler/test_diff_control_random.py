"""Differential tests against XLA:CPU: while (fori_loop, scan, while_loop), conditional (cond,
switch with clamped index), call, custom_vjp / remat, map, optimization barriers, and random
numbers (threefry through u32 arithmetic, rng-bit-generator)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from tests.neuron_customcall.compiler.ours import CASE_ARGS, case, check_case, rand

M = rand(6, 5, seed=2)
V = rand(7, seed=3)


def _scan_cumsum(x):
    return lax.scan(lambda c, v: (c + v, c * v), jnp.zeros(x.shape[1:], x.dtype), x)


def _rnn(w, xs):
    return lax.scan(lambda h, x: (jnp.tanh(h @ w + x), h.sum()), jnp.zeros(w.shape[0]), xs)


def _switch(i, x):
    return lax.switch(i, [jnp.sin, jnp.cos, lambda y: y * 3.0], x)


@jax.custom_vjp
def _clip_grad(x):
    return jnp.sin(x)


_clip_grad.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, g: (jnp.clip(g * c, -0.5, 0.5),))

CONTROL = [
    case("fori_loop", lambda x: lax.fori_loop(0, 5, lambda i, c: c * 1.5 + i, x), V),
    case("fori_loop_dynamic_bound", lambda x, n: lax.fori_loop(0, n, lambda i, c: c + jnp.sin(c), x), V, np.int32(4)),
    case("while_loop", lambda x: lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 3, c[1] * 1.1), (0, x))[1], V),
    case("while_zero_trips", lambda x: lax.while_loop(lambda c: c.sum() > 1e9, lambda c: c * 2, x), V),
    case("scan", _scan_cumsum, M), case("scan_rnn", _rnn, rand(4, 4, seed=5) * 0.5, rand(6, 4, seed=6)),
    case("scan_reverse", lambda x: lax.scan(lambda c, v: (c + v, c), 0.0, x, reverse=True), V),
    case("scan_grad", jax.grad(lambda w, xs: _rnn(w, xs)[0].sum()), rand(4, 4, seed=5) * 0.5, rand(6, 4, seed=6)),
    case("cond_true", lambda p, x: lax.cond(p, jnp.sin, jnp.cos, x), np.bool_(True), V),
    case("cond_false", lambda p, x: lax.cond(p, jnp.sin, jnp.cos, x), np.bool_(False), V),
    case("cond_on_data", lambda x: lax.cond(x.sum() > 0, lambda y: y * 2, lambda y: -y, x), V),
    *[case(f"switch_{i}", _switch, np.int32(i), V) for i in (0, 1, 2, 7, -3)],
    case("call_via_checkpoint", jax.checkpoint(lambda x: jnp.sin(jnp.sin(x)) * x), V),
    case("remat_grad", jax.grad(lambda x: jax.checkpoint(lambda y: jnp.sin(y) ** 2)(x).sum()), V),
    case("custom_vjp_grad", jax.grad(lambda x: _clip_grad(x).sum()), V * 3),
    case("optimization_barrier", lambda x: lax.optimization_barrier((x, x * 2)), V),
    case("vmap_of_cond", jax.vmap(lambda p, x: lax.cond(p, jnp.sin, jnp.cos, x)), V > 0, V),
    case("nested_loops", lambda x: lax.fori_loop(0, 3, lambda i, c: lax.fori_loop(0, 2, lambda j, d: d + i * j, c), x), V),
    case("while_in_cond", lambda p, x: lax.cond(p, lambda y: lax.fori_loop(0, 3, lambda i, c: c * 2, y), jnp.negative, x),
         np.bool_(True), V),
    case("map", lambda x: lax.map(lambda r: r.sum() * r, x), M),
]

KEY = np.array([0, 42], np.uint32)
RANDOM = [
    case("threefry_uniform", lambda k: jax.random.uniform(jax.random.wrap_key_data(k), (4, 5)), KEY),
    case("threefry_normal", lambda k: jax.random.normal(jax.random.wrap_key_data(k), (3, 7)), KEY),
    case("threefry_bits", lambda k: jax.random.bits(jax.random.wrap_key_data(k), (9,), jnp.uint32), KEY),
    case("threefry_split_randint", lambda k: jax.random.randint(jax.random.split(jax.random.wrap_key_data(k))[1], (6,), 0, 10),
         KEY),
    case("threefry_permutation", lambda k: jax.random.permutation(jax.random.wrap_key_data(k), 10), KEY),
    case("threefry_dropout", lambda k, x: jnp.where(jax.random.bernoulli(jax.random.wrap_key_data(k), 0.7, x.shape), x / 0.7, 0),
         KEY, M),
    case("threefry_in_loop", lambda k: lax.fori_loop(0, 3, lambda i, c: c + jax.random.uniform(jax.random.fold_in(
        jax.random.wrap_key_data(k), i), (4,)), jnp.zeros(4)), KEY),
    *[case(f"rng_bit_generator_{alg.name.lower()}_{dt.__name__}_{'x'.join(map(str, shape))}",
           lambda key, alg=alg, dt=dt, shape=shape: lax.rng_bit_generator(key, shape, dtype=dt, algorithm=alg),
           np.array([1, 2, 3, 4], np.uint32))
      for alg in (lax.RandomAlgorithm.RNG_THREE_FRY, lax.RandomAlgorithm.RNG_PHILOX, lax.RandomAlgorithm.RNG_DEFAULT)
      for dt, shape in ((jnp.uint32, (4, 5)), (jnp.uint8, (7,)), (jnp.uint32, (1025,)))],
    case("rng_bit_generator_u64", lambda key: lax.rng_bit_generator(key, (3, 3), dtype=jnp.uint64),
         np.array([1, 2], np.uint64), x64=True),
]


@pytest.mark.parametrize(CASE_ARGS, CONTROL + RANDOM)
def test_matches_xla_cpu(f, args, x64, rtol, atol):
    check_case(f, args, x64, rtol, atol)
