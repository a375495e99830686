"""Ops that move data without arithmetic: tuples, broadcast, reshape, transpose, slices, pad,
concatenate, reverse, iota, constants. Broadcasts and transposes return NumPy views (no copy)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from emulator.program.context import HandlerContext
from emulator.program.ops import handles

#: largest broadcast of a scalar that is filled into a new array rather than viewed with stride 0
#: (filling 2048 floats costs about what the view's construction does)
_FILL_LIMIT = 2048


@handles("constant")
def _constant(ctx: HandlerContext) -> Callable:
    value = ctx.constant(ctx.attrs["index"])
    if value.dtype != ctx.dtype or value.shape != ctx.shape:
        raise ValueError(f"constant {ctx.attrs['index']} is {value.dtype}{list(value.shape)}, "
                         f"the instruction says {ctx.type}")
    return lambda: value


@handles("tuple")
def _tuple(ctx: HandlerContext) -> Callable:
    return lambda *xs: xs


@handles("get-tuple-element")
def _gte(ctx: HandlerContext) -> Callable:
    k = ctx.attrs["index"]
    return lambda t: t[k]


def _identity(ctx: HandlerContext) -> Callable:
    return lambda x: x


@handles("broadcast")
def _broadcast(ctx: HandlerContext) -> Callable:
    dims = list(ctx.attrs["dims"])
    out = ctx.shape
    if len(dims) != len(ctx.in_shape(0)) or any(not 0 <= d < len(out) or out[d] != n
                                                 for d, n in zip(dims, ctx.in_shape(0))):
        raise ValueError(f"broadcast dims {dims} do not map {ctx.in_shape(0)} into {out}")
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    perm = tuple(order) if order != list(range(len(dims))) else None
    tmp = [1] * len(out)
    for d in dims:
        tmp[d] = out[d]
    tmp_shape = tuple(tmp)
    in_shape = ctx.in_shape(0)
    if perm is None and tuple(in_shape) == out:
        return lambda x: x
    if perm is None:
        def general(x: np.ndarray) -> np.ndarray:
            return np.broadcast_to(np.reshape(x, tmp_shape), out)
    else:
        def general(x: np.ndarray) -> np.ndarray:
            return np.broadcast_to(np.reshape(np.transpose(x, perm), tmp_shape), out)
    nout = len(out)
    if not in_shape and int(np.prod(out)) <= _FILL_LIMIT:
        dt = ctx.dtype

        def fill(x: Any) -> np.ndarray:
            # A scalar spread over a small array (loop bodies: `v * 0.1 * i`): filling a fresh
            # array (0.25 us) is cheaper than building a stride-0 view (0.7 us) below this size.
            a = np.empty(out, dt)
            a.fill(x)
            return a
        return fill

    def broadcast(x: np.ndarray) -> np.ndarray:
        # A C-contiguous operand (the usual case) is viewed directly: input axis i strides output
        # dim dims[i], every other dim has stride 0. About 0.7 us instead of broadcast_to's 2.6;
        # a training step of a small MLP makes a dozen of these.
        if type(x) is not np.ndarray:
            if not isinstance(x, np.generic):
                return general(x)
            x = np.asarray(x)  # a NumPy scalar (scalar ops' results): its 0-d array is contiguous
        if not x.flags.c_contiguous:
            return general(x)
        strides = [0] * nout
        for i, d in enumerate(dims):
            strides[d] = x.strides[i]
        view = np.ndarray(out, x.dtype, x, 0, strides)
        view.flags.writeable = False  # like broadcast_to: never a target for in-place results
        return view
    return broadcast


@handles("reshape")
def _reshape(ctx: HandlerContext) -> Callable:
    out = ctx.shape
    if int(np.prod(out)) != int(np.prod(ctx.in_shape(0))):
        raise ValueError(f"reshape of {ctx.in_shape(0)} to {out} changes the element count")
    # the method, not np.reshape: a third of the cost (its dispatch wrapper is most of a loop
    # body's small reshape); NumPy scalars have the method too
    return lambda x: x.reshape(out)


@handles("bitcast")
def _bitcast(ctx: HandlerContext) -> Callable:
    """XLA's bitcast where the layout or the element type changes along with the shape: the
    operand's buffer read back with the result's layout (src_order/dst_order: the dimensions in
    major-to-minor order). Values here have no layout, so this is a transpose to the operand's
    physical order, a flat reinterpretation and a transpose from the result's."""
    src_order, dst_order = tuple(ctx.attrs["src_order"]), tuple(ctx.attrs["dst_order"])
    in_shape, out, dst = ctx.in_shape(0), ctx.shape, ctx.dtype
    if sorted(src_order) != list(range(len(in_shape))) or sorted(dst_order) != list(range(len(out))) or \
            int(np.prod(in_shape)) * ctx.in_dtype(0).itemsize != int(np.prod(out)) * dst.itemsize:
        raise ValueError(f"bitcast of {ctx.in_dtype(0)}{list(in_shape)} (order {list(src_order)}) to "
                         f"{dst}{list(out)} (order {list(dst_order)})")
    physical = tuple(out[k] for k in dst_order)
    back = tuple(int(k) for k in np.argsort(dst_order))
    same_type = ctx.in_dtype(0) == dst

    def bitcast(x: np.ndarray) -> np.ndarray:
        flat = np.ascontiguousarray(np.transpose(x, src_order)).reshape(-1)
        if not same_type:
            flat = flat.view(np.uint8).view(dst)
        return np.transpose(flat.reshape(physical), back)
    return bitcast


@handles("transpose")
def _transpose(ctx: HandlerContext) -> Callable:
    perm = tuple(ctx.attrs["perm"])
    if sorted(perm) != list(range(len(ctx.in_shape(0)))) or tuple(ctx.in_shape(0)[p] for p in perm) != ctx.shape:
        raise ValueError(f"permutation {list(perm)} does not take {ctx.in_shape(0)} to {ctx.shape}")
    if len(perm) >= 2:
        # the method, not np.transpose (whose dispatch wrapper is a third of a small transpose's
        # cost); a value of rank 2 or more is always an ndarray here
        return lambda x: x.transpose(perm)
    return lambda x: np.transpose(x, perm)


@handles("slice")
def _slice(ctx: HandlerContext) -> Callable:
    idx = tuple(slice(s, e, st) for s, e, st in zip(ctx.attrs["start"], ctx.attrs["limit"], ctx.attrs["stride"]))
    return lambda x: x[idx]


@handles("concatenate")
def _concatenate(ctx: HandlerContext) -> Callable:
    axis = ctx.attrs["axis"]
    return lambda *xs: np.concatenate(xs, axis=axis)


@handles("pad")
def _pad(ctx: HandlerContext) -> Callable:
    low, high, interior = ctx.attrs["low"], ctx.attrs["high"], ctx.attrs["interior"]
    in_shape, out = ctx.in_shape(0), ctx.shape
    dt = ctx.dtype
    dil = tuple((d - 1) * (i + 1) + 1 if d else 0 for d, i in zip(in_shape, interior))
    dil_idx = tuple(slice(None, None, i + 1) for i in interior)
    src, dst = [], []
    for d, lo, o in zip(dil, low, out):
        s0 = max(0, -lo)
        s1 = min(d, o - lo)
        s1 = max(s1, s0)
        src.append(slice(s0, s1))
        dst.append(slice(s0 + lo, s1 + lo))
    src_t, dst_t = tuple(src), tuple(dst)
    has_interior = any(interior)

    def pad(x: np.ndarray, v: np.ndarray) -> np.ndarray:
        if has_interior:
            d = np.full(dil, v, dtype=dt)
            d[dil_idx] = x
            x = d
        result = np.full(out, v, dtype=dt)
        result[dst_t] = x[src_t]
        return result
    return pad


@handles("reverse")
def _reverse(ctx: HandlerContext) -> Callable:
    dims = tuple(ctx.attrs["dims"])
    return lambda x: np.flip(x, axis=dims)


@handles("iota")
def _iota(ctx: HandlerContext) -> Callable:
    out, dim, dt = ctx.shape, ctx.attrs["dim"], ctx.dtype
    shape = [1] * len(out)
    shape[dim] = out[dim]
    base = np.arange(out[dim], dtype=np.float64 if dt.kind in "fVc" else np.int64).reshape(shape)
    value = np.broadcast_to(base.astype(dt), out)
    return lambda: value


@handles("get-dimension-size")
def _get_dimension_size(ctx: HandlerContext) -> Callable:
    value = np.array(ctx.in_shape(0)[ctx.attrs["dimension"]], dtype=ctx.dtype)
    value.flags.writeable = False  # shared by every run: an output of it gets copied
    return lambda x: value


@handles("opt-barrier")
def _optimization_barrier(ctx: HandlerContext) -> Callable:
    return lambda x: x


#: The value of every token: it orders effects and holds no data (one read-only object).
TOKEN_VALUE = np.zeros((0,), np.uint8)
TOKEN_VALUE.flags.writeable = False


@handles("after-all")
def _after_all(ctx: HandlerContext) -> Callable:
    """Instructions run in program order on the emulator, so a token only needs to exist."""
    return lambda *operands: TOKEN_VALUE


@handles("add-dependency")
def _add_dependency(ctx: HandlerContext) -> Callable:
    return lambda value, dependency: value
