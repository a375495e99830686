"""Indexing: dynamic-slice and dynamic-update-slice (start indices clamped into range, as XLA
does), gather (clamped windows) and scatter (out-of-bounds windows skipped, as XLA does), with the
full dimension-number semantics including batching dims. Index arithmetic is whole-array."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from emulator.ops.common import lifted, reducer_ufunc
from emulator.program.context import HandlerContext
from emulator.program.dtypes import DTYPES, TUPLE
from emulator.program.ops import handles


def _window(shape: tuple[int, ...], sizes: tuple[int, ...]) -> Callable[..., tuple | slice]:
    """A function of the start indices giving the index of the window of `sizes` in an array of
    `shape`, each start clamped into [0, dim - size] as XLA does.

    Why specialised: a scan or an in-place update loop slices once per iteration, and the generic
    loop over dimensions (int(), min/max, a slice per dimension, a tuple) cost more than the
    copy. Dimensions the window spans whole (no start can move it) are fixed slices; with one
    movable dimension (the usual: one row of a stacked array) the index is built directly."""
    limits = [d - n for d, n in zip(shape, sizes)]
    if len(shape) != len(sizes) or min(limits, default=0) < 0:
        raise ValueError(f"a window of {list(sizes)} does not fit in {list(shape)}")
    moving = [d for d, lim in enumerate(limits) if lim > 0]
    whole = (slice(None),) * len(shape)  # a dimension no start can move is spanned whole
    if not moving:
        return lambda *starts: whole
    if len(moving) == 1:
        (d,) = moving
        lim, n = limits[d], sizes[d]
        before = whole[:d]  # the dimensions after d need no index: they are whole

        if not before:
            def first(*starts: Any) -> slice:
                s = int(starts[d])
                s = 0 if s < 0 else (lim if s > lim else s)
                return slice(s, s + n)
            return first

        def one(*starts: Any) -> tuple:
            s = int(starts[d])
            s = 0 if s < 0 else (lim if s > lim else s)
            return (*before, slice(s, s + n))
        return one

    def general(*starts: Any) -> tuple:
        idx = list(whole)
        for d in moving:
            s = int(starts[d])
            s = 0 if s < 0 else (limits[d] if s > limits[d] else s)
            idx[d] = slice(s, s + sizes[d])
        return tuple(idx)
    return general


@handles("dynamic-slice")
def _dynamic_slice(ctx: HandlerContext) -> Callable:
    window = _window(ctx.in_shape(0), tuple(ctx.attrs["sizes"]))

    def dslice(x: np.ndarray, *starts: Any) -> np.ndarray:
        return x[window(*starts)]
    return dslice


@handles("dynamic-update-slice")
def _dynamic_update_slice(ctx: HandlerContext) -> Callable:
    window = _window(ctx.in_shape(0), ctx.in_shape(1))

    if ctx.reuse == 0:
        def dus_in_place(x: np.ndarray, upd: np.ndarray, *starts: Any) -> np.ndarray:
            # in place only on a buffer the loop state owns (see control._own_state); else a copy
            owned = type(x) is np.ndarray and (flags := x.flags).writeable and flags.owndata
            out = x if owned else np.array(x, copy=True)
            out[window(*starts)] = upd
            return out
        return dus_in_place

    def dus(x: np.ndarray, upd: np.ndarray, *starts: Any) -> np.ndarray:
        out = np.array(x, copy=True)
        out[window(*starts)] = upd
        return out
    return dus


def _index_vectors(indices: np.ndarray, index_vector_dim: int) -> np.ndarray:
    """Indices with the index vector as the last axis (adding one of size 1 if needed)."""
    indices = np.asarray(indices)
    if index_vector_dim == indices.ndim:
        return indices[..., None]
    return np.moveaxis(indices, index_vector_dim, -1)


def _starts(iv: np.ndarray, rank: int, index_map: list[int], operand_batching: list[int],
            index_batching: list[int], index_batch_dims: list[int]) -> list[np.ndarray]:
    """Per operand dim, the window start of every index vector: from the index vector for mapped
    dims, the position along the paired index batch dim for batching dims, else 0."""
    B = iv.shape[:-1]
    starts = [np.zeros(B, np.int64) for _ in range(rank)]
    for k, d in enumerate(index_map):
        starts[d] = iv[..., k]
    for od, idim in zip(operand_batching, index_batching):
        pos = index_batch_dims.index(idim)
        shp = [1] * len(B)
        shp[pos] = B[pos]
        starts[od] = np.broadcast_to(np.arange(B[pos]).reshape(shp), B)
    return starts


def _window_index(starts: list[np.ndarray], B: tuple[int, ...], window_dims: list[int],
                  window: list[int]) -> list[np.ndarray]:
    """Per operand dim, the index of every element of every window: shape B + window (broadcast
    form): start + offset along the window dims, start alone along the others."""
    nb, nw = len(B), len(window_dims)
    index = []
    for d, st in enumerate(starts):
        s = st.reshape(B + (1,) * nw)
        if d in window_dims:
            j = window_dims.index(d)
            shp = [1] * nw
            shp[j] = window[j]
            s = s + np.arange(window[j]).reshape((1,) * nb + tuple(shp))
        index.append(s)
    return index


@handles("gather")
def _gather(ctx: HandlerContext) -> Callable:
    a = ctx.attrs
    offset_dims, collapsed = a["offset_dims"], a["collapsed_slice_dims"]
    start_map, ivd = a["start_index_map"], a["index_vector_dim"]
    obatch, ibatch = a["operand_batching_dims"], a["start_indices_batching_dims"]
    sizes = a["slice_sizes"]
    oshape = ctx.in_shape(0)
    rank = len(oshape)
    out_shape = ctx.shape
    idx_rank = len(ctx.in_shape(1))
    # batch dims of the indices (all but the index vector dim), in order
    ibatch_dims = [d for d in range(idx_rank) if d != ivd]
    removed = sorted(collapsed + obatch)
    kept = [d for d in range(rank) if d not in removed]  # operand dims that become offset dims
    batch_out = [d for d in range(len(out_shape)) if d not in offset_dims]
    # Rows: every window is whole along the dims it does not index and one element wide along
    # those it does (x[idx], embedding lookups). Then the operand, indexed dims first, is indexed
    # by the start vectors alone: one fancy index, no per-element index arrays.
    picked = [d for d in start_map if sizes[d] != oshape[d]]
    rows = not obatch and all(sizes[d] == 1 for d in picked) and all(
        sizes[d] == oshape[d] for d in range(rank) if d not in picked)
    row_perm = tuple(picked) + tuple(d for d in range(rank) if d not in picked)

    def window_elements(x: np.ndarray, iv: np.ndarray) -> np.ndarray:
        """Shape B + kept sizes: the window of every index vector (starts clamped, as XLA does)."""
        B = iv.shape[:-1]
        if rows:
            if not picked:  # every indexed dim has size 1: each window is the whole operand
                return np.broadcast_to(x.reshape(tuple(sizes[d] for d in kept)), B + tuple(sizes[d] for d in kept))
            idx = tuple(np.clip(iv[..., start_map.index(d)], 0, oshape[d] - 1) for d in picked)
            return np.transpose(x, row_perm)[idx].reshape(B + tuple(sizes[d] for d in kept))
        starts = _starts(iv, rank, start_map, obatch, ibatch, ibatch_dims)
        for d in start_map:
            starts[d] = np.clip(starts[d], 0, oshape[d] - sizes[d])
        # full index per operand dim: start (B) + offset (over kept slice dims)
        g = x[tuple(_window_index(starts, B, kept, [sizes[d] for d in kept]))]
        return np.broadcast_to(g, B + tuple(sizes[d] for d in kept))

    def gather(x: np.ndarray, indices: np.ndarray) -> np.ndarray:
        iv = _index_vectors(indices, ivd).astype(np.int64, copy=False)
        nb, nk = iv.ndim - 1, len(kept)
        g = window_elements(x, iv)
        # output: batch dims at batch_out positions, offset dims at offset_dims positions
        src_axes = list(range(nb + nk))
        order = [0] * len(out_shape)
        for i, p in enumerate(batch_out):
            order[p] = src_axes[i]
        for i, p in enumerate(offset_dims):
            order[p] = src_axes[nb + i]
        return np.transpose(g, order).reshape(out_shape)
    return gather


def apply_in_rounds(targets: list[np.ndarray], flat_idx: np.ndarray, values: list[np.ndarray],
                    f: Callable[..., list[Any]]) -> None:
    """targets.flat[idx] = f(targets.flat[idx], values) for every (idx, value) in order, where one
    target index may occur many times: occurrences are applied in rounds, each round vectorised."""
    if flat_idx.size == 0:
        return
    order = np.argsort(flat_idx, kind="stable")
    sidx = flat_idx[order]
    first = np.ones(sidx.shape, bool)
    first[1:] = sidx[1:] != sidx[:-1]
    starts = np.maximum.accumulate(np.where(first, np.arange(sidx.size), 0))
    rank_in_group = np.empty_like(order)
    rank_in_group[order] = np.arange(sidx.size) - starts
    for r in range(int(rank_in_group.max()) + 1):
        sel = rank_in_group == r
        ii = flat_idx[sel]
        res = f(*[t[ii] for t in targets], *[v[sel] for v in values])
        for t, v in zip(targets, res):
            t[ii] = np.broadcast_to(v, ii.shape)


@handles("scatter")
def _scatter(ctx: HandlerContext) -> Callable:
    a = ctx.attrs
    uwd, inserted = a["update_window_dims"], a["inserted_window_dims"]
    sd2od, ivd = a["scatter_dims_to_operand_dims"], a["index_vector_dim"]
    ibatch, sbatch = a["input_batching_dims"], a["scatter_indices_batching_dims"]
    n = (len(ctx.in_types) - 1) // 2
    oshape = ctx.in_shape(0)
    rank = len(oshape)
    ushape = ctx.in_shape(n + 1)
    idx_rank = len(ctx.in_shape(n))
    sbatch_dims = [d for d in range(idx_rank) if d != ivd]
    window_operand_dims = [d for d in range(rank) if d not in inserted and d not in ibatch]
    update_scatter_dims = [d for d in range(len(ushape)) if d not in uwd]
    reducer = a["reducer"]
    f = None if reducer else lifted(ctx.computation("computation"), n)
    out_types = [(DTYPES[t[0]], tuple(t[1])) for t in (ctx.type[1] if ctx.type[0] == TUPLE else [ctx.type])]
    W = tuple(ushape[d] for d in uwd)
    win_size = [1] * rank
    for j, d in enumerate(window_operand_dims):
        win_size[d] = W[j]
    # Rows: windows one element wide along the leading operand dims the indices address, whole
    # along all others (x.at[idx].add(v), embedding gradients): a window is a run of `row`
    # consecutive elements, so its flat indices are row start + arange(row), with no index
    # arrays per element.
    picked = [d for d in sd2od if win_size[d] != oshape[d]]
    rows = (not ibatch and sorted(picked) == list(range(len(picked))) and all(win_size[d] == 1 for d in picked)
            and all(win_size[d] == oshape[d] for d in range(len(picked), rank)))
    row = int(np.prod(oshape[len(picked):], dtype=np.int64))
    rows = rows and row > 0

    def row_windows(iv: np.ndarray, upd: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
        """(row index, values as (windows, row)) of the windows in bounds (rows case)."""
        B = iv.shape[:-1]
        ok = np.ones(B, bool)
        for k, d in enumerate(sd2od):
            ok &= (iv[..., k] >= 0) & (iv[..., k] < oshape[d]) if d in picked else iv[..., k] == 0
        r = np.ravel_multi_index(tuple(np.clip(iv[..., sd2od.index(d)], 0, oshape[d] - 1) for d in sorted(picked)),
                                 oshape[:len(picked)]) if picked else np.zeros(B, np.int64)
        vals = [np.broadcast_to(u, B + W).reshape(-1, row) for u in upd]
        if not ok.all():
            return r[ok], [v[ok.reshape(-1)] for v in vals]
        return r.reshape(-1), vals

    sum_rows = rows and reducer == "add" and n == 1 and out_types[0][0] in (np.dtype(np.float32), np.dtype(np.float64))
    if sum_rows:
        from scipy import sparse  # SciPy: already the emulator's LAPACK; its import is paid once, here

    def scatter(*args: np.ndarray) -> Any:
        operands, indices, updates = args[:n], args[n], args[n + 1:]
        iv = _index_vectors(indices, ivd).astype(np.int64, copy=False)
        # updates as (batch..., window...) in update-dim order
        upd = [np.transpose(np.asarray(u), update_scatter_dims + uwd) for u in updates]
        if sum_rows:  # x.at[idx].add(v) on floats: one sparse (touched rows x windows) matmul
            r, (v,) = row_windows(iv, upd)
            out = np.array(operands[0], copy=True).reshape(-1, row)
            if r.size:
                touched, which = np.unique(r, return_inverse=True)
                ones = np.ones(r.size, out.dtype)
                m = sparse.csr_matrix((ones, (which.reshape(-1), np.arange(r.size))), shape=(touched.size, r.size))
                out[touched] += m @ v.astype(out.dtype, copy=False)
            return out.reshape(out_types[0][1])
        if rows:
            r, vals = row_windows(iv, upd)
            flat = (np.multiply(r.reshape(-1, 1), row, dtype=np.int64) + np.arange(row, dtype=np.int64)).reshape(-1)
            vals = [v.reshape(-1) for v in vals]
        else:
            flat, vals = windows(iv, upd)
        outs = [np.array(o, copy=True).reshape(-1) for o in operands]
        if reducer == "replace":
            outs[0][flat] = vals[0]
        elif reducer:
            dt = outs[0].dtype
            reducer_ufunc(reducer, dt).at(outs[0], flat, vals[0].astype(dt, copy=False))
        elif f is not None:
            apply_in_rounds(outs, flat, vals, f)
        res = [o.reshape(s).astype(d, copy=False) for o, (d, s) in zip(outs, out_types)]
        return tuple(res) if n > 1 else res[0]

    def windows(iv: np.ndarray, upd: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
        """(flat indices, values) of the windows in bounds (any dimension numbers)."""
        B = iv.shape[:-1]
        nb = len(B)
        nw = len(W)
        starts = _starts(iv, rank, sd2od, ibatch, sbatch, sbatch_dims)
        # a window is applied only if it lies entirely within the operand
        ok = np.ones(B, bool)
        for d in range(rank):
            ok &= (starts[d] >= 0) & (starts[d] + win_size[d] <= oshape[d])
        full = [np.broadcast_to(i, B + W) for i in _window_index(starts, B, window_operand_dims, list(W))]
        okf = np.broadcast_to(ok.reshape(B + (1,) * nw), B + W)
        flat = np.ravel_multi_index(tuple(np.where(okf, i, 0) for i in full), oshape)[okf] if okf.size else np.zeros(0, np.int64)
        return flat, [np.broadcast_to(u, B + W)[okf] for u in upd]
    return scatter
