"""Differential sweep over the jax.numpy / jax.scipy / jax.nn / jax.random API surface against
XLA:CPU: whatever HLO these library functions lower to must compile and match."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from tests.neuron_customcall.compiler.ours import assert_close, run_jax

rng = np.random.default_rng(0)
X = rng.standard_normal((5, 6)).astype(np.float32)
P = np.abs(X) + 0.5
I = rng.integers(-5, 5, (5, 6)).astype(np.int32)
fns = {
 "searchsorted": (lambda a, v: jnp.searchsorted(a, v), (np.sort(X.ravel()), X[0])),
 "cumsum_rev": (lambda x: jnp.flip(jnp.cumsum(jnp.flip(x, 1), 1), 1), (X,)),
 "logaddexp": (jnp.logaddexp, (X, X.T.reshape(5, 6))),
 "hypot": (jnp.hypot, (X, P)), "arccos": (jnp.arccos, (np.clip(X, -0.9, 0.9),)),
 "arctanh": (jnp.arctanh, (np.clip(X, -0.9, 0.9),)), "sinc": (jnp.sinc, (X,)),
 "i0": (jnp.i0, (X,)), "expit": (jax.scipy.special.expit, (X,)), "logit": (jax.scipy.special.logit, (P / 3,)),
 "gammaln": (jax.scipy.special.gammaln, (P,)), "betainc": (lambda a: jax.scipy.special.betainc(a, a, a / 3), (P,)),
 "erfc": (jax.scipy.special.erfc, (X,)), "ndtri": (jax.scipy.special.ndtri, (np.clip(P / 3, 0.01, 0.99),)),
 "polyval": (lambda x: jnp.polyval(jnp.array([1., 2., 3.]), x), (X,)),
 "interp": (lambda x: jnp.interp(x, jnp.linspace(-2, 2, 7), jnp.arange(7.)), (X,)),
 "histogram": (lambda x: jnp.histogram(x, bins=4, range=(-2, 2))[0], (X,)),
 "bincount": (lambda i: jnp.bincount(i + 5, length=11), (I.ravel(),)),
 "argsort2d": (lambda x: jnp.argsort(x, axis=0), (X,)),
 "lexsort": (lambda a, b: jnp.lexsort((a, b)), (I[0], I[1])),
 "nanmean": (jnp.nanmean, (np.where(X > 1, np.nan, X),)),
 "quantile": (lambda x: jnp.quantile(x, 0.3, axis=1), (X,)),
 "cov": (jnp.cov, (X,)), "corrcoef": (jnp.corrcoef, (X,)),
 "kron": (jnp.kron, (X[:2, :2], X[:3, :3])), "trace": (jnp.trace, (X,)),
 "diag": (lambda x: jnp.diag(x[:5, :5]), (X,)), "triu_indices": (lambda x: x[jnp.triu_indices(5)], (X[:, :5],)),
 "where_int": (lambda i: jnp.where(i > 0, i // 2, i % 3), (I,)),
 "gcd": (jnp.gcd, (I, I.T.reshape(5, 6))), "lcm": (jnp.lcm, (I % 4, I.T.reshape(5, 6) % 5)),
 "round_dec": (lambda x: jnp.round(x, 2), (X,)), "trunc": (jnp.trunc, (X,)),
 "frexp": (jnp.frexp, (X,)), "ldexp": (lambda x: jnp.ldexp(x, 3), (X,)),
 "modf": (jnp.modf, (X,)), "copysign": (jnp.copysign, (X, -P)), "signbit": (jnp.signbit, (X,)),
 "float_power": (jnp.float_power, (P, X)), "cbrt_neg": (jnp.cbrt, (X,)),
 "bitwise_shifts_u8": (lambda a: (a << 3) ^ (a >> 2), (I.astype(np.uint8),)),
 "pad_wrap": (lambda x: jnp.pad(x, 2, mode="wrap"), (X,)), "pad_edge": (lambda x: jnp.pad(x, 1, mode="edge"), (X,)),
 "convolve": (lambda a: jnp.convolve(a, jnp.array([1., 2., 1.])), (X[0],)),
 "correlate_full": (lambda a: jnp.correlate(a, a, mode="full"), (X[0],)),
 "rot90": (jnp.rot90, (X,)), "meshgrid": (lambda x: jnp.meshgrid(x[0], x[1]), (X,)),
 "clip_int8": (lambda x: jnp.clip(x, -3, 3).astype(jnp.int8), (I,)),
 "top_k_bf16": (lambda x: lax.top_k(x.astype(jnp.bfloat16), 2), (X,)),
 "cummin": (lambda x: lax.cummin(x, axis=0), (X,)), "cumprod_int": (lambda i: jnp.cumprod(i % 3 + 1, 1), (I,)),
 "associative_scan": (lambda x: lax.associative_scan(jnp.add, x, axis=1), (X,)),
 "vmap_matvec": (jax.vmap(jnp.dot), (X, X)),
 "jacfwd": (jax.jacfwd(lambda x: jnp.sin(x) * x.sum()), (X[0],)),
 "hessian": (jax.hessian(lambda x: (x ** 3).sum()), (X[0],)),
 "softplus": (jax.nn.softplus, (X,)), "gelu": (jax.nn.gelu, (X,)), "gelu_exact": (lambda x: jax.nn.gelu(x, approximate=False), (X,)),
 "silu": (jax.nn.silu, (X,)), "elu": (jax.nn.elu, (X,)), "glu": (jax.nn.glu, (X,)),
 "one_hot_argmax": (lambda x: jax.nn.one_hot(jnp.argmax(x, 1), 6), (X,)),
 "categorical": (lambda k, x: jax.random.categorical(jax.random.wrap_key_data(k), x), (np.array([0, 7], np.uint32), X)),
 "rbg_key": (lambda: jax.random.uniform(jax.random.key(3, impl="rbg"), (4,)), ()),
 "unsafe_rbg": (lambda: jax.random.normal(jax.random.key(3, impl="unsafe_rbg"), (4,)), ()),
 "shuffle_choice": (lambda k: jax.random.choice(jax.random.wrap_key_data(k), 10, (4,), replace=False), (np.array([0, 7], np.uint32),)),
 "nonzero_size": (lambda x: jnp.nonzero(x > 0, size=8, fill_value=-1), (X.ravel(),)),
 "unique_size": (lambda i: jnp.unique(i, size=5, fill_value=0), (I.ravel(),)),
 "isin": (lambda a, b: jnp.isin(a, b), (I, I[0])),
 "einsum_trace": (lambda x: jnp.einsum("ii->", x[:5, :5]), (X,)),
 "cross": (jnp.cross, (X[:, :3], X[:, 3:])), "outer_int": (jnp.outer, (I[0], I[1])),
 "nan_to_num": (jnp.nan_to_num, (np.array([np.nan, np.inf, -np.inf, 1.0], np.float32),)),
 "argwhere_size": (lambda x: jnp.argwhere(x > 0, size=4), (X,)),
}


@pytest.mark.parametrize("name", sorted(fns))
def test_library_function_matches_xla_cpu(name):
    f, args = fns[name]
    assert_close(*run_jax(f, *args), rtol=1e-4, atol=1e-4)
