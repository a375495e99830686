"""Dot (any batch and contracting dims, via one batched matmul) and convolution (any dim labels,
feature/batch groups, padding, lhs/rhs dilation, window reversal, via im2col and one batched
matmul per call), and FFT."""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from emulator.executor import Factory, HandlerContext
from emulator.ops.common import compute_dtype


def _dot(ctx: HandlerContext) -> Callable:
    """One (batched) matmul; a fused output transpose that swaps the two free groups of a
    batchless dot is computed as y^T @ x^T, so the result comes out contiguous."""
    a = ctx.attrs
    lc, rc, lb, rb = a["lhs_contracting"], a["rhs_contracting"], a["lhs_batch"], a["rhs_batch"]
    out_perm = tuple(a["out_perm"])
    ls, rs = ctx.in_shape(0), ctx.in_shape(1)
    lf = [d for d in range(len(ls)) if d not in lc and d not in lb]
    rf = [d for d in range(len(rs)) if d not in rc and d not in rb]
    lperm = tuple(lb + lf + lc)
    rperm = tuple(rb + rc + rf)
    M = math.prod(ls[d] for d in lf)
    K = math.prod(ls[d] for d in lc)
    N = math.prod(rs[d] for d in rf)
    out, dt = ctx.shape, ctx.dtype
    dot_shape = tuple([ls[d] for d in lb] + [ls[d] for d in lf] + [rs[d] for d in rf])
    cdt = np.result_type(compute_dtype(ctx.in_dtype(0)), compute_dtype(ctx.in_dtype(1)))
    if dt.kind == "f" and cdt.kind in "iub":
        cdt = compute_dtype(dt)
    if cdt == np.bool_:
        cdt = np.dtype(np.int32)
    lid = lperm == tuple(range(len(ls)))
    rid = rperm == tuple(range(len(rs)))
    nl, nr = len(lf), len(rf)
    swapped = tuple(range(nl, nl + nr)) + tuple(range(nl))
    if not lb and out_perm == swapped:
        def dot_t(x: np.ndarray, y: np.ndarray) -> np.ndarray:
            x = (x if lid else np.transpose(x, lperm)).reshape(M, K).astype(cdt, copy=False)
            y = (y if rid else np.transpose(y, rperm)).reshape(K, N).astype(cdt, copy=False)
            r = np.matmul(y.T, x.T).reshape(out)
            return r if r.dtype == dt else r.astype(dt)
        return dot_t
    if not lb and not out_perm:
        def dot2(x: np.ndarray, y: np.ndarray) -> np.ndarray:
            x = (x if lid else np.transpose(x, lperm)).reshape(M, K).astype(cdt, copy=False)
            y = (y if rid else np.transpose(y, rperm)).reshape(K, N).astype(cdt, copy=False)
            r = np.matmul(x, y).reshape(out)
            return r if r.dtype == dt else r.astype(dt)
        return dot2

    batch = tuple(ls[d] for d in lb)

    def dot(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        # batch dims stay separate axes: a transposed operand is then a strided view matmul reads
        # directly, instead of a copy forced by merging non-adjacent dims
        x = np.transpose(x, lperm).reshape(batch + (M, K)).astype(cdt, copy=False)
        y = np.transpose(y, rperm).reshape(batch + (K, N)).astype(cdt, copy=False)
        r = np.matmul(x, y)
        if out_perm:
            r = np.ascontiguousarray(np.transpose(r.reshape(dot_shape), out_perm))
        r = r.reshape(out)
        return r if r.dtype == dt else r.astype(dt)
    return dot


def _convolution(ctx: HandlerContext) -> Callable:
    a = ctx.attrs
    nsp = len(a["input_spatial"])
    lperm = (a["input_batch"], a["input_feature"], *a["input_spatial"])
    rperm = (a["kernel_output_feature"], a["kernel_input_feature"], *a["kernel_spatial"])
    operm = (a["output_batch"], a["output_feature"], *a["output_spatial"])
    oinv = tuple(np.argsort(operm))
    fgc, bgc = a["feature_group_count"], a["batch_group_count"]
    ls = [ctx.in_shape(0)[d] for d in lperm]
    ks = [ctx.in_shape(1)[d] for d in rperm]
    N, C = ls[0], ls[1]
    O, I = ks[0], ks[1]
    ksp = ks[2:]
    stride, lo, hi = a["stride"], a["pad_low"], a["pad_high"]
    ldil, rdil = a["base_dilation"], a["window_dilation"]
    rev = tuple(2 + d for d in range(nsp) if a["window_reversal"][d])
    dt = ctx.dtype
    cdt = compute_dtype(np.result_type(ctx.in_dtype(0), ctx.in_dtype(1)))
    if cdt.kind in "iub" and dt.kind == "f":
        cdt = compute_dtype(dt)
    out_sp = [ctx.shape[d] for d in a["output_spatial"]]
    taps = [tuple(t) for t in np.ndindex(*ksp)]
    T = len(taps)
    S = math.prod(out_sp)

    def padded(x: np.ndarray) -> np.ndarray:
        if any(d != 1 for d in ldil):
            dil = [x.shape[0], x.shape[1]] + [(s - 1) * d + 1 if s else 0 for s, d in zip(x.shape[2:], ldil)]
            y = np.zeros(dil, x.dtype)
            y[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in ldil)] = x
            x = y
        crop = tuple(slice(max(0, -l), x.shape[2 + i] - max(0, -h) if h < 0 else None)
                     for i, (l, h) in enumerate(zip(lo, hi)))
        x = x[(slice(None), slice(None)) + crop]
        return np.pad(x, [(0, 0), (0, 0)] + [(max(0, l), max(0, h)) for l, h in zip(lo, hi)])

    positions = [tuple(p) for p in np.ndindex(*out_sp)] if S < T else []

    def im2col(x: np.ndarray) -> np.ndarray:
        """(n, c, *spatial) padded -> (c, T, n, S): every tap's strided window, stacked in the
        layout the matmul reads (channels and taps major: reshaping to (c*T, n*S) is free). The
        loop runs over kernel taps or over output positions, whichever is shorter (a weight
        gradient has a kernel as large as the image and only a few output positions)."""
        n, c = x.shape[0], x.shape[1]
        xt = x.transpose(1, 0, *range(2, x.ndim))  # (c, n, *spatial), a view
        if positions:
            cols = np.empty((c, T, n, S), x.dtype)
            for k, pos in enumerate(positions):
                sl = tuple(slice(o * s, o * s + (kk - 1) * rd + 1, rd) for o, s, kk, rd in zip(pos, stride, ksp, rdil))
                win = xt[(slice(None), slice(None)) + sl]  # (c, n, *ksp)
                cols[:, :, :, k] = np.moveaxis(win.reshape(c, n, T), 1, 2)
            return cols
        cols = np.empty((c, T, n, *out_sp), x.dtype)
        for k, t in enumerate(taps):
            sl = tuple(slice(ti * rd, ti * rd + (o - 1) * s + 1, s) for ti, rd, o, s in zip(t, rdil, out_sp, stride))
            cols[:, k] = xt[(slice(None), slice(None)) + sl]
        return cols.reshape(c, T, n, S)

    def conv(x: np.ndarray, k: np.ndarray) -> np.ndarray:
        x = np.transpose(x, lperm).astype(cdt, copy=False)
        k = np.transpose(k, rperm).astype(cdt, copy=False)
        if rev:
            k = np.flip(k, rev)
        k = k.reshape(O, I, T)
        if S == 0 or N == 0:
            r = np.zeros((N // bgc, O, *out_sp), cdt)
        elif bgc > 1:
            nb, ob = N // bgc, O // bgc
            cols = im2col(padded(x))  # (C, T, N, S), N = bgc * nb
            cols = cols.reshape(C * T, bgc, nb * S).transpose(1, 0, 2)
            kk = k.reshape(bgc, ob, I * T)
            r = np.matmul(kk, cols).reshape(bgc, ob, nb, S).transpose(2, 0, 1, 3).reshape(nb, O, *out_sp)
        else:
            g, og = fgc, O // fgc
            cols = im2col(padded(x)).reshape(g, I * T, N * S)  # (C, T, N, S), C = g * I: free
            kk = k.reshape(g, og, I * T)
            r = np.matmul(kk, cols).reshape(g, og, N, S).transpose(2, 0, 1, 3).reshape(N, O, *out_sp)
        r = np.transpose(r, oinv)
        return r.astype(dt, copy=False)
    return conv


_FFT = {"FFT": np.fft.fftn, "IFFT": np.fft.ifftn, "RFFT": np.fft.rfftn, "IRFFT": np.fft.irfftn}


def _fft(ctx: HandlerContext) -> Callable:
    kind, length, dt = ctx.attrs["fft_type"], tuple(ctx.attrs["length"]), ctx.dtype
    f = _FFT[kind]
    axes = tuple(range(-len(length), 0))
    if kind in ("RFFT", "IRFFT"):
        return lambda x: f(x, s=length, axes=axes).astype(dt)
    return lambda x: f(x, axes=axes).astype(dt)


HANDLERS: dict[str, Factory] = {"dot": _dot, "convolution": _convolution, "fft": _fft}
