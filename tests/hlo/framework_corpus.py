"""More live graphs for the registry in framework_modules: the breadth the HLO library (and later the
compiler) must read. Importing this module registers them; `framework_modules.names()` lists all.

The list follows what JAX and torch_xla emit for real workloads: MLP training, softmax and
cross-entropy, layer norm, attention, convolutions and their gradients, embeddings, loops,
conditionals, sorting, random numbers, slicing, type conversions and the unary math.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tests.hlo.framework_modules import _f32, _t, jax_module, torch_xla_module

Builder = tuple[Callable[..., Any], Sequence[Any]]


def _i32(*shape: int, high: int = 10, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, high, shape).astype(np.int32)


# ------------------------------------------------------------------------------------------- JAX
@jax_module("jax/matmul_bf16")
def _matmul_bf16() -> Builder:
    import jax.numpy as jnp

    return (lambda a, b: (a.astype(jnp.bfloat16) @ b.astype(jnp.bfloat16)).astype(jnp.float32)), (_f32(8, 16), _f32(16, 4, seed=1))


@jax_module("jax/softmax_cross_entropy")
def _xent() -> Builder:
    import jax
    import jax.numpy as jnp

    def f(logits, labels):
        logp = jax.nn.log_softmax(logits)
        return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))

    return jax.value_and_grad(f), (_f32(6, 10), _i32(6))


@jax_module("jax/layer_norm_grad")
def _layer_norm() -> Builder:
    import jax
    import jax.numpy as jnp

    def ln(x, g, b):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (((x - mu) * jax.lax.rsqrt(var + 1e-5)) * g + b).sum()

    return jax.grad(ln, argnums=(0, 1, 2)), (_f32(4, 32), _f32(32, seed=1), _f32(32, seed=2))


@jax_module("jax/attention_causal")
def _attention() -> Builder:
    import jax
    import jax.numpy as jnp

    def attn(q, k, v):
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / 4.0
        mask = jnp.tril(jnp.ones((s.shape[-2], s.shape[-1]), bool))
        s = jnp.where(mask, s, -1e9)
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, -1), v)

    return attn, (_f32(2, 2, 8, 16), _f32(2, 2, 8, 16, seed=1), _f32(2, 2, 8, 16, seed=2))


@jax_module("jax/conv_grad")
def _conv_grad() -> Builder:
    import jax
    from jax import lax

    def loss(x, k):
        y = lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return (y * y).sum()

    return jax.grad(loss, argnums=(0, 1)), (_f32(2, 6, 6, 3), _f32(3, 3, 3, 4, seed=1))


@jax_module("jax/fori_loop")
def _fori() -> Builder:
    from jax import lax

    return (lambda x: lax.fori_loop(0, 4, lambda i, c: c * 0.5 + i, x)), (_f32(3, 3),)


@jax_module("jax/scan")
def _scan() -> Builder:
    from jax import lax

    def f(xs, h0):
        def step(h, x):
            h = h * 0.9 + x
            return h, h.sum()

        return lax.scan(step, h0, xs)

    return f, (_f32(5, 4), _f32(4, seed=1))


@jax_module("jax/cond")
def _cond() -> Builder:
    from jax import lax

    return (lambda p, x: lax.cond(p > 0, lambda v: v * 2, lambda v: v - 1, x)), (np.float32(1), _f32(4))


@jax_module("jax/switch")
def _switch() -> Builder:
    import jax.numpy as jnp
    from jax import lax

    return (lambda i, x: lax.switch(i, [jnp.sin, jnp.cos, jnp.tanh], x)), (np.int32(2), _f32(4))


@jax_module("jax/cumsum_cumprod")
def _cumsum() -> Builder:
    import jax.numpy as jnp

    return (lambda x: (jnp.cumsum(x, 0), jnp.cumprod(x, 1))), (_f32(5, 6),)


@jax_module("jax/argmax_argmin")
def _argmax() -> Builder:
    import jax.numpy as jnp

    return (lambda x: (jnp.argmax(x, 1), jnp.argmin(x, 0), jnp.max(x))), (_f32(5, 6),)


@jax_module("jax/random_threefry")
def _random() -> Builder:
    import jax

    def f(seed):
        key = jax.random.key(seed)
        k1, k2 = jax.random.split(key)
        return jax.random.normal(k1, (4, 4)), jax.random.uniform(k2, (3,)), jax.random.bernoulli(k1, 0.3, (5,))

    return f, (np.uint32(7),)


@jax_module("jax/rng_bit_generator")
def _rbg() -> Builder:
    from jax import lax

    return (lambda key: lax.rng_bit_generator(key, (4, 8), dtype=np.uint32)), (np.arange(4, dtype=np.uint32),)


@jax_module("jax/dynamic_slice_update")
def _dyn() -> Builder:
    from jax import lax

    def f(x, i, u):
        s = lax.dynamic_slice(x, (i, 1), (2, 3))
        return s, lax.dynamic_update_slice(x, u, (1, i))

    return f, (_f32(6, 6), np.int32(2), _f32(2, 2, seed=1))


@jax_module("jax/pad_concat_slice_reverse")
def _shape_ops() -> Builder:
    import jax.numpy as jnp
    from jax import lax

    def f(x, y):
        p = lax.pad(x, np.float32(0), ((1, 2, 1), (0, -1, 0)))
        c = jnp.concatenate([x, y], axis=0)
        return p, c[1:7:2, ::-1], jnp.flip(y, 1), x.T.reshape(-1)

    return f, (_f32(3, 4), _f32(5, 4, seed=1))


@jax_module("jax/iota_clamp_select")
def _iota() -> Builder:
    import jax.numpy as jnp

    def f(x):
        i = jnp.arange(x.shape[0], dtype=jnp.float32)
        return jnp.where(x > 0, jnp.clip(x, -0.5, 0.5), i[:, None] * x)

    return f, (_f32(4, 3),)


@jax_module("jax/compare_all_directions")
def _compare() -> Builder:
    def f(a, b, i, j):
        return (a == b, a != b, a < b, a <= b, a > b, a >= b, i < j, i >= j)

    return f, (_f32(4), _f32(4, seed=1), _i32(4), _i32(4, seed=1))


@jax_module("jax/convert_types")
def _convert() -> Builder:
    import jax.numpy as jnp

    def f(x):
        return tuple(x.astype(t) for t in (jnp.float16, jnp.bfloat16, jnp.int8, jnp.int16, jnp.int32, jnp.uint8, jnp.uint32, jnp.bool_)) + (
            (x * 10).astype(jnp.int32).astype(jnp.float32),)

    return f, (_f32(6),)


@jax_module("jax/bitcast_convert")
def _bitcast() -> Builder:
    import jax.numpy as jnp
    from jax import lax

    return (lambda x: (lax.bitcast_convert_type(x, jnp.uint32), lax.bitcast_convert_type(x.astype(jnp.float16), jnp.int16))), (_f32(5),)


@jax_module("jax/unary_math")
def _unary() -> Builder:
    import jax
    import jax.numpy as jnp
    from jax import lax

    def f(x):
        ax = jnp.abs(x) + 0.1
        return (jnp.exp(x), jnp.log(ax), jnp.tanh(x), jnp.sqrt(ax), lax.rsqrt(ax), jnp.sin(x), jnp.cos(x),
                jax.nn.sigmoid(x), jnp.floor(x), jnp.ceil(x), jnp.round(x), jnp.sign(x), -x, jnp.expm1(x),
                jnp.log1p(ax), lax.erf(x), jnp.abs(x), lax.cbrt(x), lax.is_finite(x), jnp.arctan2(x, ax), x ** 3)

    return f, (_f32(8),)


@jax_module("jax/max_pool_reduce_window")
def _maxpool() -> Builder:
    from jax import lax

    def f(x):
        return lax.reduce_window(x, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    return f, (_f32(1, 6, 6, 2),)


@jax_module("jax/avg_pool_grad")
def _avgpool_grad() -> Builder:
    import jax
    from jax import lax

    def loss(x):
        y = lax.reduce_window(x, 0.0, lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME")
        return jax.numpy.max(y, axis=(1, 2)).sum()

    return jax.grad(loss), (_f32(1, 5, 5, 2),)


@jax_module("jax/embedding_grad")
def _embedding() -> Builder:
    import jax

    def loss(table, ids):
        return (table[ids] ** 2).sum()

    return jax.grad(loss), (_f32(10, 4), _i32(7))


@jax_module("jax/adam_step")
def _adam() -> Builder:
    import jax
    import jax.numpy as jnp

    def step(w, m, v, x, y):
        g = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        return w - 1e-3 * m / (jnp.sqrt(v) + 1e-8), m, v

    return step, (_f32(4, 2), np.zeros((4, 2), np.float32), np.zeros((4, 2), np.float32), _f32(8, 4, seed=1), _f32(8, 2, seed=2))


@jax_module("jax/integer_bitwise")
def _ints() -> Builder:
    import jax.numpy as jnp

    def f(a, b):
        return (a & b, a | b, a ^ b, ~a, a << 2, a >> 1, jnp.right_shift(a.astype(jnp.uint32), 3),
                a // (b + 1), a % (b + 1), jnp.maximum(a, b), a * b - a, jnp.abs(a - b))

    return f, (_i32(6, high=100), _i32(6, high=100, seed=1))


@jax_module("jax/top_k")
def _topk() -> Builder:
    from jax import lax

    return (lambda x: lax.top_k(x, 3)), (_f32(4, 9),)


@jax_module("jax/fft")
def _fft() -> Builder:
    import jax.numpy as jnp

    return (lambda x: jnp.abs(jnp.fft.rfft(x))), (_f32(16),)


@jax_module("jax/vmap_grad_pytree")
def _vmap() -> Builder:
    import jax
    import jax.numpy as jnp

    def loss(params, x):
        return jnp.tanh(x @ params["w"] + params["b"]).sum()

    params = {"w": _f32(3, 2), "b": _f32(2, seed=1)}
    return jax.vmap(jax.grad(loss), in_axes=(None, 0)), (params, _f32(5, 3, seed=2))


@jax_module("jax/remat")
def _remat() -> Builder:
    import jax
    import jax.numpy as jnp

    @jax.checkpoint
    def block(x):
        return jnp.sin(jnp.sin(x))

    return jax.grad(lambda x: block(x).sum()), (_f32(6),)


@jax_module("jax/large_constants")
def _constants() -> Builder:
    import jax.numpy as jnp

    table = np.linspace(-3, 3, 300, dtype=np.float32).reshape(20, 15)
    small = np.array([[1, -2], [3, 4]], np.int8)

    return (lambda x: (x + jnp.asarray(table), x[:2, :2].astype(jnp.int8) * jnp.asarray(small), jnp.float32(np.inf) * x[0, 0])), (_f32(20, 15),)


@jax_module("jax/reduce_variadic_and_prod")
def _reductions() -> Builder:
    import jax.numpy as jnp

    return (lambda x: (x.prod(0), x.min(1), jnp.all(x > 0), jnp.any(x > 1), x.mean(), jnp.var(x, 0))), (_f32(5, 4),)


@jax_module("jax/batched_dot_general")
def _bdot() -> Builder:
    from jax import lax

    def f(a, b):
        return lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,))), preferred_element_type=np.float32)

    return f, (_f32(3, 4, 5), _f32(3, 5, 2, seed=1))


# ------------------------------------------------------------------------------------ torch_xla
@torch_xla_module("torch_xla/mlp_train_step")
def _tx_mlp_train(dev: Any) -> Sequence[Any]:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = _t(dev, (5, 8)), torch.tensor([0, 1, 2, 3, 1], device=dev)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return [loss.detach()] + [p.detach() for p in model.parameters()]


@torch_xla_module("torch_xla/adam_step")
def _tx_adam(dev: Any) -> Sequence[Any]:
    import torch

    torch.manual_seed(0)
    w = torch.nn.Parameter(_t(dev, (4, 3)))
    opt = torch.optim.Adam([w], lr=1e-2)
    loss = (w.tanh() ** 2).sum()
    loss.backward()
    opt.step()
    return [w.detach()]


@torch_xla_module("torch_xla/layer_norm_backward")
def _tx_layer_norm(dev: Any) -> Sequence[Any]:
    import torch

    x = _t(dev, (4, 32)).requires_grad_()
    ln = torch.nn.LayerNorm(32).to(dev)
    out = ln(x)
    out.pow(2).sum().backward()
    return [out.detach(), x.grad, ln.weight.grad]


@torch_xla_module("torch_xla/embedding_backward")
def _tx_embedding(dev: Any) -> Sequence[Any]:
    import torch

    emb = torch.nn.Embedding(10, 4).to(dev)
    ids = torch.tensor([[1, 3, 3], [0, 9, 2]], device=dev)
    emb(ids).sum().backward()
    return [emb.weight.grad]


@torch_xla_module("torch_xla/attention")
def _tx_attention(dev: Any) -> Sequence[Any]:
    import torch

    q, k, v = _t(dev, (2, 4, 8, 16)), _t(dev, (2, 4, 8, 16), 1), _t(dev, (2, 4, 8, 16), 2)
    scores = torch.matmul(q, k.transpose(-1, -2)) / 4.0
    mask = torch.ones(8, 8, device=dev, dtype=torch.bool).tril()
    return [torch.matmul(scores.masked_fill(~mask, float("-inf")).softmax(-1), v)]


@torch_xla_module("torch_xla/cumsum_argmax")
def _tx_cumsum(dev: Any) -> Sequence[Any]:
    x = _t(dev, (5, 7))
    return [x.cumsum(1), x.argmax(1), x.max(0).values]


@torch_xla_module("torch_xla/dtypes")
def _tx_dtypes(dev: Any) -> Sequence[Any]:
    import torch

    x = _t(dev, (6,))
    return [x.to(torch.bfloat16) * 2, x.half().float(), (x * 10).to(torch.int32), x.to(torch.uint8), (x > 0).to(torch.int8)]


@torch_xla_module("torch_xla/where_clamp_cat_flip")
def _tx_misc(dev: Any) -> Sequence[Any]:
    import torch

    a, b = _t(dev, (3, 4)), _t(dev, (3, 4), 1)
    c = torch.cat([a, b], 0)
    return [torch.where(a > b, a.clamp(-0.5, 0.5), b), c.flip(0)[1:5:2], torch.nn.functional.pad(a, (1, 2))]


@torch_xla_module("torch_xla/conv2d_backward")
def _tx_conv_backward(dev: Any) -> Sequence[Any]:
    import torch

    x = _t(dev, (2, 3, 8, 8)).requires_grad_()
    conv = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1).to(dev)
    conv(x).square().mean().backward()
    return [x.grad, conv.weight.grad, conv.bias.grad]


@torch_xla_module("torch_xla/unary_math")
def _tx_unary(dev: Any) -> Sequence[Any]:
    import torch

    x = _t(dev, (8,))
    return [x.exp(), x.abs().log1p(), x.sigmoid(), torch.nn.functional.gelu(x), x.rsqrt(), x.erf(), x.sign(), x.round()]
