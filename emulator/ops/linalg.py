"""Dot (any batch and contracting dims, via one batched matmul) and FFT (convolution: conv.py)."""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from emulator.ops.common import dot_compute_dtype
from emulator.program.context import HandlerContext
from emulator.program.ops import handles


@handles("dot")
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
    cdt = dot_compute_dtype(ctx.in_dtype(0), ctx.in_dtype(1), dt)
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
        if (len(ls) == 2 and len(rs) == 2 and list(lc) == [1] and list(rc) == [0]
                and ctx.in_dtype(0) == ctx.in_dtype(1) == cdt == dt):
            # A plain [M,K] x [K,N] matrix product in the result's dtype (a training step's eight
            # dots; the transposed weights stay strided views, which matmul reads as they are):
            # matmul itself, without the four reshape/astype calls and the dtype test of dot2
            # (~2 us a dot).
            return np.matmul
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


_FFT = {"FFT": np.fft.fftn, "IFFT": np.fft.ifftn, "RFFT": np.fft.rfftn, "IRFFT": np.fft.irfftn}


@handles("fft")
def _fft(ctx: HandlerContext) -> Callable:
    kind, length, dt = ctx.attrs["fft_type"], tuple(ctx.attrs["length"]), ctx.dtype
    f = _FFT[kind]
    axes = tuple(range(-len(length), 0))
    if 0 in length or 0 in ctx.shape:  # NumPy refuses 0 points; XLA returns the (empty or zero) result
        shape = ctx.shape
        return lambda x: np.zeros(shape, dt)
    if kind in ("RFFT", "IRFFT"):
        return lambda x: f(x, s=length, axes=axes).astype(dt)
    return lambda x: f(x, axes=axes).astype(dt)
