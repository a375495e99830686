"""Convolution (any dim labels, feature and batch groups, padding, lhs/rhs dilation, strides,
window reversal) as one copy into im2col columns plus one batched matmul.

Why this shape: the columns are one `np.ascontiguousarray` of a strided window view of the padded
input (`sliding_window_view`), ordered so that the copy walks the input's memory order; the
matmul then reads them as a plain matrix. Which order is decided per call from the input's
strides, since the same HLO convolution meets channels-last images (JAX), channels-first ones
(torch) and batch-innermost ones (weight gradients, where the batch of the convolution is the
image's channel dimension):

- `rows`:   (G, N, positions, taps, C)  -> (N*S, T*C) @ (T*C, O/G)    channels innermost
- `cols`:   (G, N, C, taps, positions)  -> (O/G, C*T) @ (C*T, S)      spatial innermost
- `batch`:  (G, positions, C, taps, N)  -> per position (N, C*T) @ (C*T, O/G), N innermost

G is the feature or batch group count (XLA allows one of them above 1).
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from emulator.ops.common import dot_compute_dtype
from emulator.program.context import HandlerContext
from emulator.program.ops import handles


def _padder(spatial: list[int], lo: list[int], hi: list[int], ldil: list[int]) -> Callable[[np.ndarray], np.ndarray]:
    """The operand base-dilated (zeros between elements) and padded (negative padding crops) along
    its spatial dims, in the operand's own dim order so that its memory order is kept."""
    def padded(x: np.ndarray) -> np.ndarray:
        if any(d != 1 for d in ldil):
            shape = list(x.shape)
            for d, b in zip(spatial, ldil):
                shape[d] = (shape[d] - 1) * b + 1 if shape[d] else 0
            y = np.zeros(shape, x.dtype)
            sl = [slice(None)] * x.ndim
            for d, b in zip(spatial, ldil):
                sl[d] = slice(None, None, b)
            y[tuple(sl)] = x
            x = y
        if any(v < 0 for v in lo + hi):
            sl = [slice(None)] * x.ndim
            for d, l, h in zip(spatial, lo, hi):
                sl[d] = slice(max(0, -l), x.shape[d] + h if h < 0 else None)
            x = x[tuple(sl)]
        if any(v > 0 for v in lo + hi):
            widths = [(0, 0)] * x.ndim
            for d, l, h in zip(spatial, lo, hi):
                widths[d] = (max(0, l), max(0, h))
            x = np.pad(x, widths)
        return x
    return padded


@handles("convolution")
def _convolution(ctx: HandlerContext) -> Callable:
    a = ctx.attrs
    nsp = len(a["input_spatial"])
    lperm = (a["input_batch"], a["input_feature"], *a["input_spatial"])
    rperm = (a["kernel_output_feature"], a["kernel_input_feature"], *a["kernel_spatial"])
    operm = (a["output_batch"], a["output_feature"], *a["output_spatial"])
    oinv = tuple(int(d) for d in np.argsort(operm))
    fgc, bgc = a["feature_group_count"], a["batch_group_count"]
    N, C = ctx.in_shape(0)[lperm[0]], ctx.in_shape(0)[lperm[1]]
    O, I = ctx.in_shape(1)[rperm[0]], ctx.in_shape(1)[rperm[1]]
    ksp = [ctx.in_shape(1)[d] for d in rperm[2:]]
    stride, rdil = a["stride"], a["window_dilation"]
    rev = tuple(2 + d for d in range(nsp) if a["window_reversal"][d])
    dt = ctx.dtype
    cdt = dot_compute_dtype(ctx.in_dtype(0), ctx.in_dtype(1), dt)
    out_sp = [ctx.shape[d] for d in a["output_spatial"]]
    T, S = math.prod(ksp), math.prod(out_sp)
    G = bgc if bgc > 1 else fgc
    Nb, Og = N // bgc, O // G
    Cg = C // fgc  # input channels each group sees (= I)
    padded = _padder(list(a["input_spatial"]), a["pad_low"], a["pad_high"], a["base_dilation"])
    pos = tuple(range(3, 3 + nsp))
    taps = tuple(range(3 + nsp, 3 + 2 * nsp))
    window = tuple((k - 1) * d + 1 for k, d in zip(ksp, rdil))
    pick = ((slice(None),) * 2 + tuple(slice(0, (o - 1) * s + 1, s) for o, s in zip(out_sp, stride))
            + tuple(slice(None, None, d) for d in rdil))

    def windows(x: np.ndarray) -> np.ndarray:
        """(G, Nb, Cg, *out_sp, *ksp): a view of the padded input, one window per output position."""
        v = sliding_window_view(np.transpose(padded(x), lperm), window, axis=tuple(range(2, 2 + nsp)))[pick]
        if bgc > 1:
            return v.reshape(bgc, Nb, *v.shape[1:])
        return np.moveaxis(v.reshape(N, fgc, Cg, *v.shape[2:]), 1, 0)

    def kernel(k: np.ndarray) -> np.ndarray:
        """(G, Og, I, *ksp)."""
        k = np.transpose(k, rperm).astype(cdt, copy=False)
        if rev:
            k = np.flip(k, rev)
        return k.reshape(G, Og, I, *ksp)

    def conv(x: np.ndarray, k: np.ndarray) -> np.ndarray:
        if S == 0 or N == 0:
            return np.transpose(np.zeros((Nb, O, *out_sp), cdt), oinv).astype(dt, copy=False)
        v = windows(x.astype(cdt, copy=False))
        kg = kernel(k)
        s_n, s_c = abs(v.strides[1]), abs(v.strides[2])
        s_sp = min((abs(v.strides[d]) for d in pos + taps if v.shape[d] > 1), default=0)
        if s_n < s_c and (s_n < s_sp or not s_sp) and Nb > 1:  # batch innermost: weight gradients
            cols = np.ascontiguousarray(v.transpose(0, *pos, 2, *taps, 1)).reshape(G, S, Cg * T, Nb)
            km = kg.reshape(G, 1, Og, Cg * T)
            r = np.matmul(km, cols)  # (G, S, Og, Nb)
            r = r.reshape(G, *out_sp, Og, Nb).transpose(2 + nsp, 0, 1 + nsp, *range(1, 1 + nsp))
        elif s_c < s_sp:  # channels innermost
            cols = np.ascontiguousarray(v.transpose(0, 1, *pos, *taps, 2)).reshape(G, Nb * S, T * Cg)
            km = kg.transpose(0, *range(3, 3 + nsp), 2, 1).reshape(G, T * Cg, Og)
            r = np.matmul(cols, km)  # (G, Nb*S, Og)
            r = r.reshape(G, Nb, *out_sp, Og).transpose(1, 0, 2 + nsp, *range(2, 2 + nsp))
        else:  # spatial innermost
            cols = np.ascontiguousarray(v.transpose(0, 1, 2, *taps, *pos)).reshape(G, Nb, Cg * T, S)
            km = kg.reshape(G, 1, Og, Cg * T)
            r = np.matmul(km, cols)  # (G, Nb, Og, S)
            r = r.reshape(G, Nb, Og, *out_sp).transpose(1, 0, 2, *range(3, 3 + nsp))
        r = r.reshape(Nb, O, *out_sp)  # (Nb, G, Og, ...) -> (Nb, O, ...): a copy only when G > 1
        return np.transpose(r, oinv).astype(dt, copy=False)
    return conv
