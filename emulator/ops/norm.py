"""Batch-norm ops (training, inference, grad) as XLA defines them, over every dim but the
feature dim; torch_xla emits them for layer norm."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from emulator.ops.common import compute_dtype
from emulator.program.context import HandlerContext
from emulator.program.ops import handles


def _setup(ctx: HandlerContext) -> tuple[tuple[int, ...], tuple[int, ...], float, np.dtype, np.dtype]:
    """(reduced axes, per-feature broadcast shape, epsilon, dtype, compute dtype)."""
    f = ctx.attrs["feature_index"]
    shape = ctx.in_shape(0)
    axes = tuple(d for d in range(len(shape)) if d != f)
    bshape = tuple(shape[d] if d == f else 1 for d in range(len(shape)))
    dt = ctx.in_dtype(0)
    return axes, bshape, ctx.attrs["epsilon"], dt, compute_dtype(dt)


@handles("batch-norm-training")
def _training(ctx: HandlerContext) -> Callable:
    axes, bshape, eps, dt, cdt = _setup(ctx)

    def bn(x: np.ndarray, scale: np.ndarray, offset: np.ndarray) -> tuple:
        x = x.astype(cdt, copy=False)
        mean = x.mean(axis=axes)
        var = np.square(x - mean.reshape(bshape)).mean(axis=axes)
        y = (x - mean.reshape(bshape)) / np.sqrt(var.reshape(bshape) + cdt.type(eps)) * scale.astype(cdt).reshape(bshape) \
            + offset.astype(cdt).reshape(bshape)
        return y.astype(dt), mean.astype(dt), var.astype(dt)
    return bn


@handles("batch-norm-inference")
def _inference(ctx: HandlerContext) -> Callable:
    axes, bshape, eps, dt, cdt = _setup(ctx)

    def bn(x, scale, offset, mean, var):  # type: ignore[no-untyped-def]
        r = lambda v: v.astype(cdt).reshape(bshape)  # noqa: E731
        y = (x.astype(cdt) - r(mean)) / np.sqrt(r(var) + cdt.type(eps)) * r(scale) + r(offset)
        return y.astype(dt)
    return bn


@handles("batch-norm-grad")
def _grad(ctx: HandlerContext) -> Callable:
    axes, bshape, eps, dt, cdt = _setup(ctx)
    shape = ctx.in_shape(0)
    count = int(np.prod([shape[d] for d in axes])) if axes else 1

    def bn_grad(x, scale, mean, var, dy):  # type: ignore[no-untyped-def]
        r = lambda v: v.astype(cdt).reshape(bshape)  # noqa: E731
        x, dy = x.astype(cdt), dy.astype(cdt)
        inv = 1 / np.sqrt(r(var) + cdt.type(eps))
        xhat = (x - r(mean)) * inv
        g_offset = dy.sum(axis=axes)
        g_scale = (dy * xhat).sum(axis=axes)
        g_x = r(scale) * inv / count * (count * dy - g_offset.reshape(bshape) - xhat * g_scale.reshape(bshape))
        return g_x.astype(dt), g_scale.astype(dt), g_offset.astype(dt)
    return bn_grad
