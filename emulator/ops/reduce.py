"""Reductions: reduce (fast ufunc path for recognised reducers, otherwise a pairwise tree of the
lifted reducer computation, which also handles variadic reduces such as argmax), reduce-window
(one vectorised step per window tap; running sums/maxes as accumulate), select-and-scatter."""
from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from emulator.ops.common import NARROW, F32, compute_dtype, lifted, reducer_identity, reducer_ufunc, unpack
from emulator.ops.elementwise import where
from emulator.program.context import HandlerContext
from emulator.program.dtypes import DTYPES, TUPLE
from emulator.program.ops import handles


def _out_types(ctx: HandlerContext) -> list[tuple[np.dtype, tuple[int, ...]]]:
    if ctx.type[0] == TUPLE:
        return [(DTYPES[t[0]], tuple(t[1])) for t in ctx.type[1]]
    return [(ctx.dtype, ctx.shape)]


def tree_reduce(f: Callable[..., list[Any]], xs: list[np.ndarray], inits: list[np.ndarray]) -> list[np.ndarray]:
    """Reduce the last axis of each x with f(acc..., x...) pairwise; then fold the init values in."""
    k = xs[0].shape[-1]
    if k == 0:
        return [np.broadcast_to(i, x.shape[:-1]) for i, x in zip(inits, xs)]
    while k > 1:
        h = k // 2
        r = f(*[x[..., :h] for x in xs], *[x[..., h:2 * h] for x in xs])
        if k % 2:
            xs = [np.concatenate([np.broadcast_to(ri, x[..., :h].shape), x[..., 2 * h:]], axis=-1) for ri, x in zip(r, xs)]
        else:
            xs = [np.broadcast_to(ri, x[..., :h].shape) for ri, x in zip(r, xs)]
        k = h + k % 2
    return f(*[np.broadcast_to(i, x.shape[:-1]) for i, x in zip(inits, xs)], *[x[..., 0] for x in xs])


@handles("reduce")
def _reduce(ctx: HandlerContext) -> Callable:
    dims = tuple(ctx.attrs["dims"])
    n = len(ctx.in_types) // 2
    outs = _out_types(ctx)
    rank = len(ctx.in_shape(0))
    keep = [d for d in range(rank) if d not in dims]
    if n == 1 and ctx.attrs["reducer"]:
        dt = outs[0][0]
        uf = reducer_ufunc(ctx.attrs["reducer"], dt)
        cdt = compute_dtype(dt)

        empty = any(ctx.in_shape(0)[d] == 0 for d in dims)
        out_shape = outs[0][1]

        def fast(x: np.ndarray, init: np.ndarray) -> np.ndarray:
            if empty:  # XLA: the init value (NumPy refuses max/min over nothing)
                return np.full(out_shape, init, dt)
            if cdt != dt:
                return uf(uf.reduce(x.astype(cdt), axis=dims), init.astype(cdt)).astype(dt)
            return np.asarray(uf(uf.reduce(x, axis=dims), init)).astype(dt, copy=False)
        return fast
    f = lifted(ctx.computation("computation"), n)
    perm = tuple(keep) + dims
    out_shape = tuple(ctx.in_shape(0)[d] for d in keep)

    def general(*args: np.ndarray) -> Any:
        xs = [np.transpose(a, perm).reshape(out_shape + (-1,)) for a in args[:n]]
        res = tree_reduce(f, xs, list(args[n:]))
        res = [np.asarray(np.broadcast_to(r, s)).astype(d, copy=False) for r, (d, s) in zip(res, outs)]
        return tuple(res) if n > 1 else res[0]
    if n == 2 and ctx.attrs["reducer"] in _ARGMINMAX:
        return _argminmax(ctx.attrs["reducer"], f, perm, out_shape, outs, general)
    return general


#: reducer name -> (NumPy's pick, whether a NaN is kept (JAX) or loses to what follows (XLA's ArgMinMax)).
_ARGMINMAX = {"argmax": (np.argmax, True), "argmin": (np.argmin, True),
              "argmax_ge": (np.argmax, False), "argmin_le": (np.argmin, False)}


def _positional(ids: np.ndarray) -> bool:
    """Whether the index operand holds the positions along the last axis: a broadcast view of an
    iota, checked on one row."""
    k = ids.shape[-1]
    return all(st == 0 for st in ids.strides[:-1]) and np.array_equal(ids[(0,) * (ids.ndim - 1)], np.arange(k))


def _after_last_nan(xs: np.ndarray, pick: Callable, fill: float) -> tuple[np.ndarray, np.ndarray]:
    """XLA's ArgMinMax comparator in XLA:CPU's in-order loop: a NaN loses to the next element, so
    a row ends with the pick among the elements after its last NaN (ties to the first), or with
    its last NaN. Returns (positions, whether the row has a NaN)."""
    nan = np.isnan(xs)
    has = nan.any(axis=-1)
    if not has.any():
        return pick(xs, axis=-1), has
    k = xs.shape[-1]
    last = (k - 1 - np.argmax(nan[..., ::-1], axis=-1))[..., None]
    masked = np.where(np.arange(k) <= last, xs.dtype.type(fill), xs)
    tail = pick(masked, axis=-1)[..., None]
    tail = np.where(last == k - 1, last, np.where(tail <= last, last + 1, tail))[..., 0]
    return np.where(has, tail, pick(xs, axis=-1)), has


def _argminmax(kind: str, f: Callable[..., list[Any]], perm: tuple[int, ...], out_shape: tuple[int, ...],
               outs: list[tuple[np.dtype, tuple[int, ...]]], general: Callable[..., Any]) -> Callable:
    """A (values, indices) reduce whose computation the compiler recognised as an argmax/argmin
    comparator, run with NumPy's argmax/argmin.

    JAX's (`argmax`, `argmin`): the first NaN if any (its comparator keeps a NaN accumulator:
    XLA:CPU's in-order loop keeps the first), else the extreme value, ties to the smallest index:
    NumPy's own answer when the indices are the positions along the reduced axis; otherwise the
    smallest index among the positions holding the extreme value, or the first NaN's index.
    XLA's ArgMinMax (`argmax_ge`, `argmin_le`, torch_xla): see _after_last_nan; with indices that
    are not positions it takes the general tree path. The init values are folded in by the
    computation itself, as the tree reduction does (not for rows with a NaN under XLA's
    comparator, where the NaN has already displaced the init, which came first)."""
    pick, keeps_nan = _ARGMINMAX[kind]
    fill = -np.inf if pick is np.argmax else np.inf

    def run(x: np.ndarray, idx: np.ndarray, init_v: np.ndarray, init_i: np.ndarray) -> tuple[np.ndarray, ...]:
        xs = np.transpose(x, perm).reshape(out_shape + (-1,))
        ids = np.transpose(idx, perm).reshape(out_shape + (-1,))
        k = xs.shape[-1]
        if k == 0 or xs.size == 0:
            res = [np.broadcast_to(init_v, out_shape), np.broadcast_to(init_i, out_shape)]
            return tuple(np.asarray(np.broadcast_to(r, s)).astype(d, copy=False) for r, (d, s) in zip(res, outs))
        positional = _positional(ids)
        if not keeps_nan and not positional:
            return general(x, idx, init_v, init_i)
        if xs.dtype in NARROW:
            xs = xs.astype(F32)  # NumPy has no argmax loop for them; f32 compares them exactly
        nan_rows = None
        if keeps_nan or xs.dtype.kind != "f":
            pos = pick(xs, axis=-1)
        else:
            pos, nan_rows = _after_last_nan(xs, pick, fill)
        pos = pos[..., None]
        best = np.take_along_axis(xs, pos, -1)
        if positional:
            chosen = np.take_along_axis(ids, pos, -1)[..., 0]
        else:  # indices are data: the smallest one among equal winners; a NaN wins as it comes
            chosen = np.min(np.where(xs == best, ids, np.iinfo(ids.dtype).max), axis=-1)
            if xs.dtype.kind == "f":
                chosen = np.where(np.isnan(best[..., 0]), np.take_along_axis(ids, pos, -1)[..., 0], chosen)
        res = f(np.broadcast_to(init_v, out_shape), np.broadcast_to(init_i, out_shape), best[..., 0], chosen)
        if nan_rows is not None and nan_rows.any():
            res = [np.where(nan_rows, own, folded) for own, folded in zip((best[..., 0], chosen), res)]
        return tuple(np.asarray(np.broadcast_to(r, s)).astype(d, copy=False) for r, (d, s) in zip(res, outs))
    return run


class Window:
    """A window description with per-dimension size, stride, padding and dilations."""

    def __init__(self, attrs: dict[str, Any]) -> None:
        self.size = attrs["size"]
        self.stride = attrs["stride"]
        self.pad_low = attrs["pad_low"]
        self.pad_high = attrs["pad_high"]
        self.base_dilation = attrs["base_dilation"]
        self.window_dilation = attrs["window_dilation"]

    def padded(self, x: np.ndarray, value: Any) -> np.ndarray:
        """x base-dilated and padded with `value` (negative padding crops)."""
        if all(b == 1 for b in self.base_dilation) and all(p >= 0 for p in self.pad_low + self.pad_high):
            if not any(self.pad_low) and not any(self.pad_high):
                return x
            v = np.asarray(value, x.dtype)
            return np.pad(x, list(zip(self.pad_low, self.pad_high)), constant_values=v)
        dil = [(d - 1) * b + 1 if d else 0 for d, b in zip(x.shape, self.base_dilation)]
        full = [lo + d + hi for lo, d, hi in zip(self.pad_low, dil, self.pad_high)]
        out = np.full(full, value, x.dtype)
        src, dst = [], []
        for d, lo, o, b in zip(x.shape, self.pad_low, full, self.base_dilation):
            idx = np.arange(d) * b + lo
            ok = (idx >= 0) & (idx < o)
            src.append(np.nonzero(ok)[0])
            dst.append(idx[ok])
        out[np.ix_(*dst)] = x[np.ix_(*src)]
        return out

    def has_gaps(self) -> bool:
        """Whether the padded operand holds positions that are no operand element (padding or
        base-dilation holes)."""
        return any(self.pad_low) or any(self.pad_high) or any(b != 1 for b in self.base_dilation)

    def out_shape(self, padded_shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(max(0, (p - (w - 1) * wd - 1) // s + 1) if p >= (w - 1) * wd + 1 else 0
                     for p, w, wd, s in zip(padded_shape, self.size, self.window_dilation, self.stride))

    def taps(self) -> list[tuple[int, ...]]:
        return list(itertools.product(*[range(w) for w in self.size]))

    def tap_slice(self, tap: tuple[int, ...], out: tuple[int, ...]) -> tuple[slice, ...]:
        return tuple(slice(t * wd, t * wd + (o - 1) * s + 1, s)
                     for t, wd, o, s in zip(tap, self.window_dilation, out, self.stride))


def _accumulate_axis(w: Window, shape: tuple[int, ...]) -> tuple[int, bool] | None:
    """The axis (and direction) if this window is a running reduction (cumsum and friends)."""
    axis = None
    for d, n in enumerate(shape):
        if w.size[d] == 1 and w.pad_low[d] == 0 and w.pad_high[d] == 0:
            continue
        if axis is not None or w.size[d] != n or n < 2:
            return None
        axis = d
    if axis is None or w.stride[axis] != 1 or w.window_dilation[axis] != 1 or any(b != 1 for b in w.base_dilation):
        return None
    if any(s != 1 for s in w.stride):
        return None
    n = shape[axis]
    if (w.pad_low[axis], w.pad_high[axis]) == (n - 1, 0):
        return axis, False
    if (w.pad_low[axis], w.pad_high[axis]) == (0, n - 1):
        return axis, True
    return None


@handles("reduce-window")
def _reduce_window(ctx: HandlerContext) -> Callable:
    n = len(ctx.in_types) // 2
    w = Window(ctx.attrs)
    outs = _out_types(ctx)
    in_shape = ctx.in_shape(0)
    if n == 1 and ctx.attrs["reducer"]:
        dt = outs[0][0]
        uf = reducer_ufunc(ctx.attrs["reducer"], dt)
        cdt = compute_dtype(dt)
        acc = _accumulate_axis(w, in_shape)
        if acc is not None:
            axis, rev = acc

            def running(x: np.ndarray, init: np.ndarray) -> np.ndarray:
                x = x.astype(cdt, copy=False)
                if rev:
                    r = np.flip(uf.accumulate(np.flip(x, axis), axis=axis), axis)
                else:
                    r = uf.accumulate(x, axis=axis)
                return uf(r, init.astype(cdt)).astype(dt, copy=False)
            return running
        taps = w.taps()
        fill = reducer_identity(ctx.attrs["reducer"], np.dtype(cdt))

        def fast(x: np.ndarray, init: np.ndarray) -> np.ndarray:
            # padding and dilation holes take no part (XLA applies the init once per window and
            # skips them): they hold the reducer's identity
            p = w.padded(x.astype(cdt, copy=False), fill)
            out = w.out_shape(p.shape)
            r = np.broadcast_to(init.astype(cdt), out).copy()
            for t in taps:
                uf(r, p[w.tap_slice(t, out)], out=r)
            return r.astype(dt, copy=False)
        return fast
    f = lifted(ctx.computation("computation"), n)
    taps = w.taps()
    gaps = w.has_gaps()

    def general(*args: np.ndarray) -> Any:
        ps = [w.padded(a, i) for a, i in zip(args[:n], args[n:])]
        out = w.out_shape(ps[0].shape)
        rs = [np.broadcast_to(i, out) for i in args[n:]]
        # which padded positions hold operand elements: XLA skips the others (padding, holes)
        real = w.padded(np.ones(args[0].shape, np.bool_), False) if gaps else None
        for t in taps:
            sl = w.tap_slice(t, out)
            new = f(*rs, *[p[sl] for p in ps])
            rs = new if real is None else [np.where(real[sl], a, b) for a, b in zip(new, rs)]
        rs = [np.asarray(np.broadcast_to(r, s)).astype(d, copy=False) for r, (d, s) in zip(rs, outs)]
        return tuple(rs) if n > 1 else rs[0]
    return general


@handles("select-and-scatter")
def _select_and_scatter(ctx: HandlerContext) -> Callable:
    """For each window of the operand pick one element with `select` (skipping padding, as XLA
    does), then combine the source value into the result there with `scatter`."""
    w = Window(ctx.attrs)
    select = lifted(ctx.computation("select"), 1)
    scatter_name = ctx.attrs["reducer"]
    scatter = None if scatter_name else lifted(ctx.computation("scatter"), 1)
    dt = ctx.dtype
    shape = ctx.in_shape(0)
    src_shape = ctx.in_shape(1)
    taps = w.taps()
    rank = len(shape)
    tiled = (w.size == w.stride and not any(w.pad_low) and not any(w.pad_high)
             and all(d == 1 for d in w.window_dilation) and all(d % k == 0 for d, k in zip(shape, w.size))
             and all(d // k == s for d, k, s in zip(shape, w.size, src_shape)))
    if tiled:
        return _select_and_scatter_tiled(shape, src_shape, w.size, select, scatter_name, scatter, dt)
    grids = np.meshgrid(*[np.arange(o) for o in src_shape], indexing="ij")

    def run(operand: np.ndarray, source: np.ndarray, init: np.ndarray) -> np.ndarray:
        best_val = None
        best_pos = np.zeros(src_shape, np.int64)
        have = np.zeros(src_shape, bool)
        for t in taps:
            pos = [grids[d] * w.stride[d] + t[d] * w.window_dilation[d] - w.pad_low[d] for d in range(rank)]
            ok = np.ones(src_shape, bool)
            for d in range(rank):
                ok &= (pos[d] >= 0) & (pos[d] < shape[d])
            clipped = tuple(np.clip(p, 0, max(s - 1, 0)) for p, s in zip(pos, shape))
            flat = np.ravel_multi_index(clipped, shape) if operand.size else np.zeros(src_shape, np.int64)
            val = operand[clipped] if operand.size else np.zeros(src_shape, operand.dtype)
            if best_val is None:
                take = ok
                best_val = val
            else:
                keep = np.asarray(select(best_val, val)[0], bool)
                take = ok & (~have | ~keep)
                best_val = np.where(take, val, best_val)
            best_pos = np.where(take, flat, best_pos)
            have |= ok
        result = np.full(int(np.prod(shape)), init, dt)
        idx = best_pos[have]
        vals = np.asarray(source)[have]
        if scatter_name:
            reducer_ufunc(scatter_name, dt).at(result, idx, vals.astype(dt))
        else:
            from emulator.ops.indexing import apply_in_rounds
            apply_in_rounds([result], idx, [vals], scatter)
        return result.reshape(shape)
    return run


def _select_and_scatter_tiled(shape: tuple[int, ...], src_shape: tuple[int, ...], size: list[int],
                              select: Callable, scatter_name: str, scatter: Callable | None,
                              dt: np.dtype) -> Callable:
    """Windows that tile the operand exactly (stride == size, no padding; max-pool gradients):
    every element belongs to one window. The operand is viewed as (d0 / k0, k0, d1 / k1, k1, ...)
    (a reshape, free for a contiguous operand), so each window tap is a strided view of source
    shape; the selection is XLA's scan over the taps in order, the result is written tap by tap
    into the same split view of a fresh array. No transposes, no one-hot arrays."""
    split = tuple(v for d, k in zip(shape, size) for v in (d // k, k))
    taps = [tuple(idx) for idx in np.ndindex(*size)]

    def tap_view(x: np.ndarray, tap: tuple[int, ...]) -> np.ndarray:
        return x[tuple(v for t in tap for v in (slice(None), t))]

    def run(operand: np.ndarray, source: np.ndarray, init: np.ndarray) -> np.ndarray:
        x = np.reshape(operand, split)
        # each tap copied contiguous first: np.where on strided views is several times slower
        best = np.ascontiguousarray(tap_view(x, taps[0]))
        which = np.zeros(src_shape, np.int32)
        for t in range(1, len(taps)):
            cand = np.ascontiguousarray(tap_view(x, taps[t]))
            take = ~np.asarray(select(best, cand)[0], bool)
            best = where(take, cand, best)
            which = where(take, np.int32(t), which)
        init_b = np.broadcast_to(np.asarray(init, dt), src_shape)
        if scatter_name:
            placed = np.asarray(reducer_ufunc(scatter_name, dt)(init_b, np.asarray(source, dt)), dt)
        else:
            placed = np.asarray(scatter(init_b, np.asarray(source, dt))[0], dt)
        out = np.empty(split, dt)
        fill = np.asarray(init, dt)
        for t, tap in enumerate(taps):
            np.copyto(tap_view(out, tap), where(which == t, placed, fill))
        return out.reshape(shape)
    return run
