"""Our own versions of AWS's NKI tutorial kernels, in both generations of the API: beta 1
(``neuronxcc.nki``: ``nl.load``/``nl.store``, ``nisa.*`` returning tiles) and beta 2 (``nki``:
``nisa.dma_copy`` and ISA instructions writing into ``dst=``), each with a NumPy reference
(``TUTORIALS``). test_nki_tutorials.py runs every (tutorial, generation) on NumPy arrays and
inside a jax.jit and a torch_xla graph.

Layouts follow the tutorials: attention takes ``q``, ``k`` as [d_head, seqlen] (the contraction
dimension on the partitions) and ``v`` as [seqlen, d_head]; matmuls take ``lhsT`` [K, M].
Shapes are small multiples of the tile sizes so that each kernel still loops and tiles.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from neuron_customcall import nki
from neuron_customcall.nki import isa as nisa1
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.isa import beta2 as nisa
from tests.neuron_customcall.nki.test_nki_kernels import (flash_attention_kernel,
                                                         layernorm_kernel, matmul_basic_kernel,
                                                         matmul_tiled_kernel, rmsnorm_kernel,
                                                         softmax_kernel, tensor_add_kernel)

P = 128
EPS = 1e-5


def _sb(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)


def _ps(shape):
    return nl.ndarray(shape, dtype=nl.float32, buffer=nl.psum)


def _hbm(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.shared_hbm)


# --- tensor add ------------------------------------------------------------------------------------

@nki.jit
def tensor_add_b2(a, b):
    out = _hbm(a.shape, a.dtype)
    i, j = nl.program_id(0), nl.program_id(1)
    ta, tb = _sb((P, 512)), _sb((P, 512))
    nisa.dma_copy(dst=ta, src=a[i * P:(i + 1) * P, j * 512:(j + 1) * 512])
    nisa.dma_copy(dst=tb, src=b[i * P:(i + 1) * P, j * 512:(j + 1) * 512])
    nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
    nisa.dma_copy(dst=out[i * P:(i + 1) * P, j * 512:(j + 1) * 512], src=ta)
    return out


# --- transpose2d: swap the two free dimensions [P, f1 * f2] -> [P, f2 * f1] -----------------------

F1, F2 = 8, 12


@nki.jit
def transpose2d_b1(x):
    out = _hbm(x.shape, x.dtype)
    i_p, i_f1, i_f2 = nl.mgrid[0:P, 0:F1, 0:F2]
    t = nl.load(x[i_p, i_f1 * F2 + i_f2])
    y = _sb((P, F2 * F1), x.dtype)
    y[i_p, i_f2 * F1 + i_f1] = nl.copy(t)
    nl.store(out, value=y)
    return out


@nki.jit
def transpose2d_b2(x):
    out = _hbm(x.shape, x.dtype)
    t, y = _sb((P, F1, F2)), _sb((P, F2, F1))
    nisa.dma_copy(dst=t, src=x.reshape((P, F1, F2)))
    nisa.tensor_copy(dst=y.permute((0, 2, 1)), src=t)
    nisa.dma_copy(dst=out.reshape((P, F2, F1)), src=y)
    return out


def transpose2d_ref(x):
    return x.reshape(P, F1, F2).transpose(0, 2, 1).reshape(P, F2 * F1)


# --- average pool 2x2: [C, H, W] -> [C, H / 2, W / 2] -----------------------------------------------

@nki.jit
def avgpool_b1(x):
    c, h, w = x.shape
    out = _hbm((c, h // 2, w // 2), x.dtype)
    t = nl.load(x)
    windows = t.reshape((c, h // 2, 2, w // 2, 2))
    nl.store(out, value=nl.multiply(nl.sum(windows, axis=[2, 4]), 0.25))
    return out


@nki.jit
def avgpool_b2(x):
    c, h, w = x.shape
    out = _hbm((c, h // 2, w // 2), x.dtype)
    t, s = _sb((c, h, w)), _sb((c, h // 2, w // 2))
    nisa.dma_copy(dst=t, src=x)
    windows = t.reshape((c, h // 2, 2, w // 2, 2)).permute((0, 1, 3, 2, 4))
    nisa.tensor_reduce(dst=s, op=nl.add, data=windows, axis=(3, 4))
    nisa.tensor_scalar(dst=s, data=s, op0=nl.multiply, operand0=0.25)
    nisa.dma_copy(dst=out, src=s)
    return out


def avgpool_ref(x):
    c, h, w = x.shape
    return x.reshape(c, h // 2, 2, w // 2, 2).mean(axis=(2, 4))


# --- matmul: basic, tiled, blocked with hoisted loads (the "fully optimised" shape) -------------

@nki.jit
def matmul_basic_b2(lhsT, rhs):
    k, m = lhsT.shape
    out = _hbm((m, rhs.shape[1]))
    a, b = _sb((k, m)), _sb(rhs.shape)
    nisa.dma_copy(dst=a, src=lhsT)
    nisa.dma_copy(dst=b, src=rhs)
    acc, res = _ps((m, rhs.shape[1])), _sb((m, rhs.shape[1]))
    nisa.nc_matmul(dst=acc, stationary=a, moving=b)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


@nki.jit
def matmul_tiled_b2(lhsT, rhs):
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = _hbm((M, N))
    for m in nl.affine_range(M // P):
        for n in nl.affine_range(N // 512):
            acc = _ps((P, 512))
            for k in nl.affine_range(K // P):
                a, b = _sb((P, P)), _sb((P, 512))
                nisa.dma_copy(dst=a, src=lhsT[k * P:(k + 1) * P, m * P:(m + 1) * P])
                nisa.dma_copy(dst=b, src=rhs[k * P:(k + 1) * P, n * 512:(n + 1) * 512])
                nisa.nc_matmul(dst=acc, stationary=a, moving=b)
            res = _sb((P, 512))
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[m * P:(m + 1) * P, n * 512:(n + 1) * 512], src=res)
    return out


BLOCK_M, BLOCK_N = 2, 2  # tiles per block: each lhsT/rhs block is loaded once per block pair


@nki.jit
def matmul_blocked_b1(lhsT, rhs):
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = _hbm((M, N))
    bm, bn = BLOCK_M * P, BLOCK_N * 512
    for m in nl.affine_range(M // bm):
        lhsT_block = nl.ndarray((K // P, nl.par_dim(P), bm), nl.float32, buffer=nl.sbuf)
        for k in nl.affine_range(K // P):
            lhsT_block[k] = nl.load(lhsT[k * P:(k + 1) * P, m * bm:(m + 1) * bm])
        for n in nl.affine_range(N // bn):
            rhs_block = nl.ndarray((K // P, nl.par_dim(P), bn), nl.float32, buffer=nl.sbuf)
            for k in nl.affine_range(K // P):
                rhs_block[k] = nl.load(rhs[k * P:(k + 1) * P, n * bn:(n + 1) * bn])
            for tm in nl.affine_range(BLOCK_M):
                for tn in nl.affine_range(BLOCK_N):
                    acc = nl.zeros((P, 512), nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(K // P):
                        acc += nisa1.nc_matmul(lhsT_block[k, :, tm * P:(tm + 1) * P],
                                               rhs_block[k, :, tn * 512:(tn + 1) * 512])
                    nl.store(out[m * bm + tm * P:m * bm + (tm + 1) * P,
                                 n * bn + tn * 512:n * bn + (tn + 1) * 512], value=nl.copy(acc))
    return out


@nki.jit
def matmul_blocked_b2(lhsT, rhs):
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = _hbm((M, N))
    bm, bn = BLOCK_M * P, BLOCK_N * 512
    for m in nl.affine_range(M // bm):
        lhsT_block = nl.ndarray((K // P, nl.par_dim(P), bm), nl.float32, buffer=nl.sbuf)
        for k in nl.affine_range(K // P):
            nisa.dma_copy(dst=lhsT_block[k], src=lhsT[k * P:(k + 1) * P, m * bm:(m + 1) * bm])
        for n in nl.affine_range(N // bn):
            rhs_block = nl.ndarray((K // P, nl.par_dim(P), bn), nl.float32, buffer=nl.sbuf)
            for k in nl.affine_range(K // P):
                nisa.dma_copy(dst=rhs_block[k], src=rhs[k * P:(k + 1) * P, n * bn:(n + 1) * bn])
            for tm in nl.affine_range(BLOCK_M):
                for tn in nl.affine_range(BLOCK_N):
                    acc = _ps((P, 512))
                    for k in nl.affine_range(K // P):
                        nisa.nc_matmul(dst=acc, stationary=lhsT_block[k, :, tm * P:(tm + 1) * P],
                                       moving=rhs_block[k, :, tn * 512:(tn + 1) * 512])
                    res = _sb((P, 512))
                    nisa.tensor_copy(dst=res, src=acc)
                    nisa.dma_copy(dst=out[m * bm + tm * P:m * bm + (tm + 1) * P,
                                          n * bn + tn * 512:n * bn + (tn + 1) * 512], src=res)
    return out


def matmul_ref(lhsT, rhs):
    return lhsT.T.astype(np.float64) @ rhs


# --- layer norm: v1 from mean and variance, v2 with bn_stats/bn_aggr -------------------------------

@nki.jit
def layernorm_v1_b1(x, gamma, beta):
    n, d = x.shape
    out = _hbm(x.shape, x.dtype)
    g = nl.broadcast_to(nl.load(gamma.reshape((1, d))), (P, d))
    b = nl.broadcast_to(nl.load(beta.reshape((1, d))), (P, d))
    for i in nl.affine_range(n // P):
        t = nl.load(x[i * P:(i + 1) * P, :])
        mean = nl.mean(t, axis=1)  # [P]: a per-row column
        centred = nl.subtract(t, mean)
        var = nl.mean(nl.square(centred), axis=1, keepdims=True)
        y = nl.multiply(centred, nl.rsqrt(nl.add(var, EPS)))
        nl.store(out[i * P:(i + 1) * P, :], value=nl.add(nl.multiply(y, g), b))
    return out


def _layernorm_b2(x, gamma, beta, stats):
    n, d = x.shape
    out = _hbm(x.shape, x.dtype)
    g, b = _sb((P, d)), _sb((P, d))
    nisa.dma_copy(dst=g, src=gamma.ap([[0, P], [1, d]], 0))  # partition step 0: broadcast
    nisa.dma_copy(dst=b, src=beta.ap([[0, P], [1, d]], 0))
    for i in nl.affine_range(n // P):
        t = _sb((P, d))
        nisa.dma_copy(dst=t, src=x[i * P:(i + 1) * P, :])
        mean, inv = _sb((P, 1)), _sb((P, 1))
        stats(t, mean, inv, d)
        nisa.activation(dst=inv, op=nl.rsqrt, data=inv, bias=EPS)
        y = _sb((P, d))
        nisa.tensor_scalar(dst=y, data=t, op0=nl.subtract, operand0=mean, op1=nl.multiply,
                           operand1=inv)
        nisa.tensor_tensor(dst=y, data1=y, data2=g, op=nl.multiply)
        nisa.tensor_tensor(dst=y, data1=y, data2=b, op=nl.add)
        nisa.dma_copy(dst=out[i * P:(i + 1) * P, :], src=y)
    return out


def _moments(t, mean, var, d):
    """v1: the mean by a sum reduction, the variance as the mean of squared deviations."""
    nisa.tensor_reduce(dst=mean, op=nl.add, data=t, axis=1, keepdims=True)
    nisa.tensor_scalar(dst=mean, data=mean, op0=nl.multiply, operand0=1.0 / d)
    dev = _sb((P, d))
    nisa.tensor_scalar(dst=dev, data=t, op0=nl.subtract, operand0=mean)
    sq = _sb((P, d))
    nisa.activation(dst=sq, op=nl.square, data=dev, reduce_op=nl.add, reduce_res=var,
                    reduce_cmd=nisa.reduce_cmd.reset_reduce)
    nisa.tensor_scalar(dst=var, data=var, op0=nl.multiply, operand0=1.0 / d)


def _bn_moments(t, mean, var, d):
    """v2: bn_stats then bn_aggr (mean and variance in one pass)."""
    stats, mv = _sb((P, 6)), _sb((P, 2))
    nisa.bn_stats(dst=stats, data=t)
    nisa.bn_aggr(dst=mv, data=stats)
    nisa.tensor_copy(dst=mean, src=mv[:, 0:1])
    nisa.tensor_copy(dst=var, src=mv[:, 1:2])


@nki.jit
def layernorm_v1_b2(x, gamma, beta):
    return _layernorm_b2(x, gamma, beta, _moments)


@nki.jit
def layernorm_v2_b2(x, gamma, beta):
    return _layernorm_b2(x, gamma, beta, _bn_moments)


def layernorm_ref(x, gamma, beta):
    x = x.astype(np.float64)
    mu = x.mean(axis=1, keepdims=True)
    return (x - mu) / np.sqrt(x.var(axis=1, keepdims=True) + EPS) * gamma + beta


# --- softmax over rows, RMSNorm ---------------------------------------------------------------

@nki.jit
def softmax_b2(x):
    out = _hbm(x.shape, x.dtype)
    i = nl.program_id(0)
    d = x.shape[1]
    t, e = _sb((P, d)), _sb((P, d))
    nisa.dma_copy(dst=t, src=x[i * P:(i + 1) * P, :])
    neg_max, total = _sb((P, 1)), _sb((P, 1))
    nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=t, axis=1, negate=True, keepdims=True)
    nisa.activation(dst=e, op=nl.exp, data=t, bias=neg_max, reduce_op=nl.add, reduce_res=total,
                    reduce_cmd=nisa.reduce_cmd.reset_reduce)
    nisa.reciprocal(dst=total, data=total)
    nisa.tensor_scalar(dst=e, data=e, op0=nl.multiply, operand0=total)
    nisa.dma_copy(dst=out[i * P:(i + 1) * P, :], src=e)
    return out


def softmax_ref(x):
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@nki.jit
def rmsnorm_b2(x, w):
    n, d = x.shape
    out = _hbm(x.shape, x.dtype)
    wt = _sb((P, d))
    nisa.dma_copy(dst=wt, src=w.ap([[0, P], [1, d]], 0))
    for i in nl.affine_range(n // P):
        t, sq, ms = _sb((P, d)), _sb((P, d)), _sb((P, 1))
        nisa.dma_copy(dst=t, src=x[i * P:(i + 1) * P, :])
        nisa.activation(dst=sq, op=nl.square, data=t, reduce_op=nl.add, reduce_res=ms,
                        reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.tensor_scalar(dst=ms, data=ms, op0=nl.multiply, operand0=1.0 / d, op1=nl.add,
                           operand1=EPS)
        nisa.activation(dst=ms, op=nl.rsqrt, data=ms)
        nisa.scalar_tensor_tensor(dst=t, data=t, op0=nl.multiply, operand0=ms, op1=nl.multiply,
                                  operand1=wt)
        nisa.dma_copy(dst=out[i * P:(i + 1) * P, :], src=t)
    return out


def rmsnorm_ref(x, w):
    x = x.astype(np.float64)
    return x / np.sqrt((x ** 2).mean(axis=1, keepdims=True) + EPS) * w


@nki.jit
def rmsnorm_b1(x, w):
    return rmsnorm_kernel(x, w, EPS)


# --- fused Mamba: deltaA = exp(delta * A), deltaBu = delta * B * u, a linear scan over the
# sequence, then C * scan summed over the state dimension -------------------------------------

@nki.jit
def mamba_b1(delta, u, A, B, C):
    batch, channels, seq = delta.shape
    state = A.shape[1]
    out = _hbm((batch, channels, seq), delta.dtype)
    for ib in nl.affine_range(batch):
        for ic in nl.affine_range(channels // P):
            rows = nl.ds(ic * P, P)
            d_t = nl.load(delta[ib, rows, :])
            u_t = nl.load(u[ib, rows, :])
            a_t = nl.load(A[rows, :])
            du = nl.multiply(d_t, u_t)
            acc = nl.zeros((P, seq), nl.float32)
            for s in nl.affine_range(state):
                b_t = nl.broadcast_to(nl.load(B[ib, s:s + 1, :]), (P, seq))
                c_t = nl.broadcast_to(nl.load(C[ib, s:s + 1, :]), (P, seq))
                dA = nisa1.activation(op=nl.exp, data=d_t, scale=a_t[:, s:s + 1])
                dBu = nl.multiply(du, b_t)
                scan = nisa1.tensor_tensor_scan(dA, dBu, initial=0.0, op0=nl.multiply,
                                                op1=nl.add)
                acc += nl.multiply(scan, c_t)
            nl.store(out[ib, rows, :], value=acc)
    return out


@nki.jit
def mamba_b2(delta, u, A, B, C):
    batch, channels, seq = delta.shape
    state = A.shape[1]
    out = _hbm((batch, channels, seq), delta.dtype)
    for ib in nl.affine_range(batch):
        for ic in nl.affine_range(channels // P):
            d_t, u_t, a_t = _sb((P, seq)), _sb((P, seq)), _sb((P, state))
            nisa.dma_copy(dst=d_t, src=delta[ib, ic * P:(ic + 1) * P, :])
            nisa.dma_copy(dst=u_t, src=u[ib, ic * P:(ic + 1) * P, :])
            nisa.dma_copy(dst=a_t, src=A[ic * P:(ic + 1) * P, :])
            du, acc = _sb((P, seq)), _sb((P, seq))
            nisa.tensor_tensor(dst=du, data1=d_t, data2=u_t, op=nl.multiply)
            nisa.memset(dst=acc, value=0.0)
            for s in nl.sequential_range(state):
                b_t, c_t = _sb((P, seq)), _sb((P, seq))
                nisa.dma_copy(dst=b_t, src=B[ib, s:s + 1, :].ap([[0, P], [1, seq]]))
                nisa.dma_copy(dst=c_t, src=C[ib, s:s + 1, :].ap([[0, P], [1, seq]]))
                dA, dBu, scan = _sb((P, seq)), _sb((P, seq)), _sb((P, seq))
                nisa.activation(dst=dA, op=nl.exp, data=d_t, scale=a_t[:, s:s + 1])
                nisa.tensor_tensor(dst=dBu, data1=du, data2=b_t, op=nl.multiply)
                nisa.tensor_tensor_scan(dst=scan, data0=dA, data1=dBu, initial=0.0,
                                        op0=nl.multiply, op1=nl.add)
                nisa.tensor_tensor(dst=scan, data1=scan, data2=c_t, op=nl.multiply)
                nisa.tensor_tensor(dst=acc, data1=acc, data2=scan, op=nl.add)
            nisa.dma_copy(dst=out[ib, ic * P:(ic + 1) * P, :], src=acc)
    return out


def mamba_ref(delta, u, A, B, C):
    delta, u, A, B, C = (v.astype(np.float64) for v in (delta, u, A, B, C))
    dA = np.exp(delta[:, :, None, :] * A[None, :, :, None])
    dBu = delta[:, :, None, :] * B[:, None, :, :] * u[:, :, None, :]
    h = np.zeros(dA.shape[:-1])
    scan = np.empty_like(dA)
    for i in range(dA.shape[-1]):
        h = dA[..., i] * h + dBu[..., i]
        scan[..., i] = h
    return (C[:, None, :, :] * scan).sum(axis=2)


# --- attention forward: v1 (language ops), v2 (ISA), v6 (ScalarE exp with its reduction) --------
# q, k: [d_head, seqlen]; v: [seqlen, d_head]; out: [seqlen, d_head]

@nki.jit
def attention_v1_b1(q, k, v):
    d, s = q.shape
    out = _hbm((s, d), q.dtype)
    qk = nl.matmul(nl.load(q), nl.load(k), transpose_x=True)  # [s_q, s_k]
    row_max = nl.max(qk, axis=1)
    e = nl.exp(nl.subtract(qk, row_max))
    scores = nl.divide(e, nl.sum(e, axis=1))
    nl.store(out, value=nl.matmul(scores, nl.load(v)))
    return out


@nki.jit
def attention_v2_b1(q, k, v):
    d, s = q.shape
    out = _hbm((s, d), q.dtype)
    qk = nisa1.nc_matmul(stationary=nl.load(q), moving=nl.load(k))
    row_max = nisa1.tensor_reduce(op=nl.max, data=qk, axis=1)
    norm = nisa1.tensor_scalar(data=qk, op0=nl.subtract, operand0=row_max)
    e = nisa1.activation(op=nl.exp, data=norm)
    inv = nisa1.reciprocal(data=nisa1.tensor_reduce(op=nl.add, data=e, axis=1))
    scores = nisa1.tensor_scalar(data=e, op0=nl.multiply, operand0=inv)
    scores_t = nisa1.tensor_copy(nisa1.nc_transpose(scores))
    nl.store(out, value=nisa1.nc_matmul(stationary=scores_t, moving=nl.load(v)))
    return out


@nki.jit
def attention_v6_b1(q, k, v):
    d, s = q.shape
    out = _hbm((s, d), q.dtype)
    q_sb, k_sb = nl.load(q), nl.load(k)
    v_sb = nl.ndarray((s // P, nl.par_dim(P), d), nl.float32, buffer=nl.sbuf)
    for ik in nl.affine_range(s // P):
        v_sb[ik] = nl.load(v[nl.ds(ik * P, P), :])
    for iq in nl.affine_range(s // P):
        qk = nl.ndarray((s // 512, nl.par_dim(P), 512), nl.float32, buffer=nl.psum)
        for ik in nl.affine_range(s // 512):
            qk[ik] = nisa1.nc_matmul(q_sb[:, nl.ds(iq * P, P)], k_sb[:, nl.ds(ik * 512, 512)])
        maxes = nl.ndarray((nl.par_dim(P), s // 512), nl.float32, buffer=nl.sbuf)
        for ik in nl.affine_range(s // 512):
            maxes[:, ik] = nisa1.tensor_reduce(op=nl.max, data=qk[ik], axis=1)
        neg_max = nisa1.tensor_reduce(op=nl.max, data=maxes, axis=1, negate=True)
        e = nl.ndarray((nl.par_dim(P), s), nl.float32, buffer=nl.sbuf)
        sums = nl.ndarray((nl.par_dim(P), s // 512), nl.float32, buffer=nl.sbuf)
        for ik in nl.affine_range(s // 512):
            e[:, nl.ds(ik * 512, 512)] = nisa1.activation(
                op=nl.exp, data=qk[ik], bias=neg_max, reduce_op=nl.add,
                reduce_res=sums[:, ik], reduce_cmd=nisa1.reduce_cmd.reset_reduce)
        inv = nisa1.reciprocal(nisa1.tensor_reduce(op=nl.add, data=sums, axis=1))
        acc = nl.zeros((P, d), nl.float32, buffer=nl.psum)
        for ik in nl.affine_range(s // P):
            e_t = nisa1.tensor_copy(nisa1.nc_transpose(e[:, nl.ds(ik * P, P)]))
            acc += nisa1.nc_matmul(e_t, v_sb[ik])
        nl.store(out[nl.ds(iq * P, P), :],
                 value=nisa1.tensor_scalar(data=acc, op0=nl.multiply, operand0=inv))
    return out


def _softmax_rows_b2(qk, e, s):
    """exp(qk - rowmax) into ``e`` with the row sums from ScalarE's reduction, then scaled by
    their reciprocal (the v2/v6 softmax)."""
    neg_max, total = _sb((P, 1)), _sb((P, 1))
    nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=qk, axis=1, negate=True, keepdims=True)
    nisa.activation(dst=e, op=nl.exp, data=qk, bias=neg_max, reduce_op=nl.add,
                    reduce_res=total, reduce_cmd=nisa.reduce_cmd.reset_reduce)
    nisa.reciprocal(dst=total, data=total)
    nisa.tensor_scalar(dst=e, data=e, op0=nl.multiply, operand0=total)


@nki.jit
def attention_b2(q, k, v):
    d, s = q.shape
    out = _hbm((s, d), q.dtype)
    q_sb, k_sb, v_sb = _sb((d, s)), _sb((d, s)), nl.ndarray((s // P, nl.par_dim(P), d),
                                                              nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=q_sb, src=q)
    nisa.dma_copy(dst=k_sb, src=k)
    for ik in nl.affine_range(s // P):
        nisa.dma_copy(dst=v_sb[ik], src=v[ik * P:(ik + 1) * P, :])
    for iq in nl.affine_range(s // P):
        qk, e = nl.ndarray((nl.par_dim(P), s), nl.float32, buffer=nl.psum), _sb((P, s))
        n = min(s, 512)  # the moving free size is at most 512
        for ik in nl.affine_range(s // n):
            nisa.nc_matmul(dst=qk[:, ik * n:(ik + 1) * n],
                           stationary=q_sb[:, iq * P:(iq + 1) * P],
                           moving=k_sb[:, ik * n:(ik + 1) * n])
        _softmax_rows_b2(qk, e, s)
        acc = _ps((P, d))
        for ik in nl.affine_range(s // P):
            e_tp, e_t = _ps((P, P)), _sb((P, P))
            nisa.nc_transpose(dst=e_tp, data=e[:, ik * P:(ik + 1) * P])
            nisa.tensor_copy(dst=e_t, src=e_tp)
            nisa.nc_matmul(dst=acc, stationary=e_t, moving=v_sb[ik])
        res = _sb((P, d))
        nisa.tensor_copy(dst=res, src=acc)
        nisa.dma_copy(dst=out[iq * P:(iq + 1) * P, :], src=res)
    return out


def attention_ref(q, k, v):
    return softmax_ref(q.T.astype(np.float64) @ k) @ v


# --- flash attention: forward with an online softmax, backward by recomputation ----------------
# forward: q [s_q, d], k, v [s_k, d] (the language tutorial's layout, see test_nki_kernels)

SCALE = 0.125


@nki.jit
def flash_fwd_b2(q, k, v):
    s_q, d = q.shape
    s_k = k.shape[0]
    out = _hbm((s_q, d))
    i = nl.program_id(0)
    q_t = _sb((d, P))
    nisa.dma_transpose(dst=q_t, src=q[i * P:(i + 1) * P, :])
    m, l, o = _sb((P, 1)), _sb((P, 1)), _sb((P, d))
    nisa.memset(dst=m, value=-1e30)
    nisa.memset(dst=l, value=0.0)
    nisa.memset(dst=o, value=0.0)
    for j in nl.sequential_range(s_k // P):
        k_t, v_t = _sb((d, P)), _sb((P, d))
        nisa.dma_transpose(dst=k_t, src=k[j * P:(j + 1) * P, :])
        nisa.dma_copy(dst=v_t, src=v[j * P:(j + 1) * P, :])
        s_ps = _ps((P, P))
        nisa.nc_matmul(dst=s_ps, stationary=q_t, moving=k_t)
        s_sb, m_new, neg, corr = _sb((P, P)), _sb((P, 1)), _sb((P, 1)), _sb((P, 1))
        nisa.tensor_scalar(dst=s_sb, data=s_ps, op0=nl.multiply, operand0=1.0 / np.sqrt(d))
        nisa.tensor_reduce(dst=m_new, op=nl.maximum, data=s_sb, axis=1, keepdims=True)
        nisa.tensor_tensor(dst=m_new, data1=m_new, data2=m, op=nl.maximum)
        nisa.tensor_scalar(dst=neg, data=m_new, op0=nl.multiply, operand0=-1.0)
        p, rowsum = _sb((P, P)), _sb((P, 1))
        nisa.activation(dst=p, op=nl.exp, data=s_sb, bias=neg, reduce_op=nl.add,
                        reduce_res=rowsum, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.activation(dst=corr, op=nl.exp, data=m, bias=neg)
        nisa.scalar_tensor_tensor(dst=l, data=l, op0=nl.multiply, operand0=corr, op1=nl.add,
                                  operand1=rowsum)
        p_tp, p_t, pv = _ps((P, P)), _sb((P, P)), _ps((P, d))
        nisa.nc_transpose(dst=p_tp, data=p)
        nisa.tensor_copy(dst=p_t, src=p_tp)
        nisa.nc_matmul(dst=pv, stationary=p_t, moving=v_t)
        nisa.scalar_tensor_tensor(dst=o, data=o, op0=nl.multiply, operand0=corr, op1=nl.add,
                                  operand1=pv)
        nisa.tensor_copy(dst=m, src=m_new)
    nisa.tensor_scalar(dst=o, data=o, op0=nl.divide, operand0=l)
    nisa.dma_copy(dst=out[i * P:(i + 1) * P, :], src=o)
    return out


def flash_fwd_ref(q, k, v):
    return softmax_ref(q.astype(np.float64) @ k.T / np.sqrt(q.shape[1])) @ v


# backward: q, k, v, dout [s, d] (one tile of 128 queries per program would need a reduction
# over programs for dk, dv: here one program loops over key and query blocks)

@nki.jit
def flash_bwd_b1(q, k, v, dout):
    s, d = q.shape
    dq, dk, dv = _hbm((s, d)), _hbm((s, d)), _hbm((s, d))
    nb = s // P
    # row statistics of the forward pass: logsumexp and D = rowsum(dout * out)
    lse = nl.ndarray((nb, nl.par_dim(P), 1), nl.float32, buffer=nl.sbuf)
    dsum = nl.ndarray((nb, nl.par_dim(P), 1), nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(nb):
        q_i = nl.load(q[nl.ds(i * P, P), :])
        sc = nl.ndarray((P, s), nl.float32, buffer=nl.sbuf)
        for j in nl.affine_range(nb):
            k_j = nl.load(k[nl.ds(j * P, P), :])
            sc[:, nl.ds(j * P, P)] = nl.multiply(nl.matmul(q_i, nl.transpose(k_j)), SCALE)
        mx = nl.max(sc, axis=1, keepdims=True)
        e = nl.exp(nl.subtract(sc, mx))
        total = nl.sum(e, axis=1, keepdims=True)
        lse[i] = nl.add(mx, nl.log(total))
        o_acc = nl.zeros((P, d), nl.float32, buffer=nl.psum)
        for j in nl.affine_range(nb):
            o_acc += nl.matmul(e[:, nl.ds(j * P, P)], nl.load(v[nl.ds(j * P, P), :]))
        o_i = nl.divide(nl.copy(o_acc), total)
        dsum[i] = nl.sum(nl.multiply(nl.load(dout[nl.ds(i * P, P), :]), o_i), axis=1,
                         keepdims=True)
    for j in nl.affine_range(nb):
        k_j = nl.load(k[nl.ds(j * P, P), :])
        v_j = nl.load(v[nl.ds(j * P, P), :])
        dk_acc = nl.zeros((P, d), nl.float32, buffer=nl.psum)
        dv_acc = nl.zeros((P, d), nl.float32, buffer=nl.psum)
        for i in nl.affine_range(nb):
            q_i = nl.load(q[nl.ds(i * P, P), :])
            do_i = nl.load(dout[nl.ds(i * P, P), :])
            p = nl.exp(nl.subtract(nl.multiply(nl.matmul(q_i, nl.transpose(k_j)), SCALE),
                                   lse[i]))
            dv_acc += nl.matmul(nl.transpose(p), do_i)
            dp = nl.matmul(do_i, nl.transpose(v_j))
            ds = nl.multiply(nl.multiply(p, nl.subtract(dp, dsum[i])), SCALE)
            dk_acc += nl.matmul(nl.transpose(ds), q_i)
        nl.store(dk[nl.ds(j * P, P), :], value=nl.copy(dk_acc))
        nl.store(dv[nl.ds(j * P, P), :], value=nl.copy(dv_acc))
    for i in nl.affine_range(nb):
        q_i = nl.load(q[nl.ds(i * P, P), :])
        do_i = nl.load(dout[nl.ds(i * P, P), :])
        dq_acc = nl.zeros((P, d), nl.float32, buffer=nl.psum)
        for j in nl.affine_range(nb):
            k_j = nl.load(k[nl.ds(j * P, P), :])
            v_j = nl.load(v[nl.ds(j * P, P), :])
            p = nl.exp(nl.subtract(nl.multiply(nl.matmul(q_i, nl.transpose(k_j)), SCALE),
                                   lse[i]))
            dp = nl.matmul(do_i, nl.transpose(v_j))
            ds = nl.multiply(nl.multiply(p, nl.subtract(dp, dsum[i])), SCALE)
            dq_acc += nl.matmul(ds, k_j)
        nl.store(dq[nl.ds(i * P, P), :], value=nl.copy(dq_acc))
    return dq, dk, dv


def _transpose_b2(src, rows, cols):
    """An SBUF [rows, cols] tile transposed through TensorE and PSUM into a new SBUF tile."""
    t_ps, t_sb = _ps((cols, rows)), _sb((cols, rows))
    nisa.nc_transpose(dst=t_ps, data=src)
    nisa.tensor_copy(dst=t_sb, src=t_ps)
    return t_sb


def _probs_b2(q_t, k_t, lse_i):
    """p = exp(q k^T * SCALE - lse) for one [P, P] block (q_t, k_t: [d, P])."""
    s_ps, p = _ps((P, P)), _sb((P, P))
    nisa.nc_matmul(dst=s_ps, stationary=q_t, moving=k_t)
    nisa.activation(dst=p, op=nl.exp, data=s_ps, bias=lse_i, scale=SCALE)
    return p


def _dscores_b2(p, do_t, v_t, dsum_i):
    """ds = p * (do v^T - D) * SCALE for one block (do_t, v_t: [d, P])."""
    dp = _ps((P, P))
    nisa.nc_matmul(dst=dp, stationary=do_t, moving=v_t)
    ds = _sb((P, P))
    nisa.tensor_scalar(dst=ds, data=dp, op0=nl.subtract, operand0=dsum_i, op1=nl.multiply,
                       operand1=SCALE)
    nisa.tensor_tensor(dst=ds, data1=ds, data2=p, op=nl.multiply)
    return ds


@nki.jit
def flash_bwd_b2(q, k, v, dout):
    s, d = q.shape
    dq, dk, dv = _hbm((s, d)), _hbm((s, d)), _hbm((s, d))
    nb = s // P
    qs = nl.ndarray((nb, nl.par_dim(P), d), nl.float32, buffer=nl.sbuf)
    ks, vs, dos = (nl.ndarray((nb, nl.par_dim(P), d), nl.float32, buffer=nl.sbuf)
                   for _ in range(3))
    q_t, k_t, v_t, do_t = (nl.ndarray((nb, nl.par_dim(d), P), nl.float32, buffer=nl.sbuf)
                           for _ in range(4))
    for b in nl.affine_range(nb):
        for src, rows, cols in ((q, qs, q_t), (k, ks, k_t), (v, vs, v_t), (dout, dos, do_t)):
            nisa.dma_copy(dst=rows[b], src=src[b * P:(b + 1) * P, :])
            nisa.dma_transpose(dst=cols[b], src=src[b * P:(b + 1) * P, :])
    neg_lse = nl.ndarray((nb, nl.par_dim(P), 1), nl.float32, buffer=nl.sbuf)
    dsum = nl.ndarray((nb, nl.par_dim(P), 1), nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(nb):
        sc, e, total = _ps((P, s)), _sb((P, s)), _sb((P, 1))
        for j in nl.affine_range(nb):
            nisa.nc_matmul(dst=sc[:, j * P:(j + 1) * P], stationary=q_t[i], moving=k_t[j])
        mx = _sb((P, 1))
        nisa.tensor_reduce(dst=mx, op=nl.maximum, data=sc, axis=1, keepdims=True)
        nisa.tensor_scalar(dst=mx, data=mx, op0=nl.multiply, operand0=-SCALE)
        nisa.activation(dst=e, op=nl.exp, data=sc, bias=mx, scale=SCALE, reduce_op=nl.add,
                        reduce_res=total, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        logs = _sb((P, 1))
        nisa.activation(dst=logs, op=nl.log, data=total)
        nisa.tensor_tensor(dst=neg_lse[i], data1=mx, data2=logs, op=nl.subtract)
        o_ps = _ps((P, d))
        for j in nl.affine_range(nb):
            nisa.nc_matmul(dst=o_ps, stationary=_transpose_b2(e[:, j * P:(j + 1) * P], P, P),
                           moving=vs[j])
        o, prod = _sb((P, d)), _sb((P, d))
        nisa.tensor_scalar(dst=o, data=o_ps, op0=nl.divide, operand0=total)
        nisa.tensor_tensor(dst=prod, data1=o, data2=dos[i], op=nl.multiply)
        nisa.tensor_reduce(dst=dsum[i], op=nl.add, data=prod, axis=1, keepdims=True)
    for j in nl.affine_range(nb):
        dk_acc, dv_acc = _ps((P, d)), _ps((P, d))
        for i in nl.affine_range(nb):
            p = _probs_b2(q_t[i], k_t[j], neg_lse[i])
            nisa.nc_matmul(dst=dv_acc, stationary=p, moving=dos[i])
            ds = _dscores_b2(p, do_t[i], v_t[j], dsum[i])
            nisa.nc_matmul(dst=dk_acc, stationary=ds, moving=qs[i])
        for acc, dst in ((dk_acc, dk), (dv_acc, dv)):
            res = _sb((P, d))
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=dst[j * P:(j + 1) * P, :], src=res)
    for i in nl.affine_range(nb):
        dq_acc = _ps((P, d))
        for j in nl.affine_range(nb):
            p = _probs_b2(q_t[i], k_t[j], neg_lse[i])
            ds = _dscores_b2(p, do_t[i], v_t[j], dsum[i])
            nisa.nc_matmul(dst=dq_acc, stationary=_transpose_b2(ds, P, P), moving=ks[j])
        res = _sb((P, d))
        nisa.tensor_copy(dst=res, src=dq_acc)
        nisa.dma_copy(dst=dq[i * P:(i + 1) * P, :], src=res)
    return dq, dk, dv


def flash_bwd_ref(q, k, v, dout):
    q, k, v, dout = (a.astype(np.float64) for a in (q, k, v, dout))
    p = softmax_ref(q @ k.T * SCALE)
    o = p @ v
    dv = p.T @ dout
    dp = dout @ v.T
    ds = p * (dp - (dout * o).sum(axis=1, keepdims=True)) * SCALE
    return ds @ k, ds.T @ q, dv


# --- the table ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Tutorial:
    """One tutorial: its kernels per generation (with their grid), inputs and reference."""
    name: str
    beta1: Callable
    beta2: Callable
    inputs: Callable[[np.random.Generator], tuple]
    reference: Callable
    grid: tuple = ()
    rtol: float = 1e-4
    atol: float = 1e-4

    def kernel(self, generation: str):
        k = self.beta1 if generation == "beta1" else self.beta2
        return k[self.grid] if self.grid else k


def _normal(*shapes):
    return lambda rng: tuple(rng.standard_normal(s).astype(np.float32) for s in shapes)


def _mamba_inputs(rng):
    batch, channels, seq, state = 2, 256, 64, 4
    return (rng.uniform(0.01, 0.1, (batch, channels, seq)).astype(np.float32),
            rng.standard_normal((batch, channels, seq)).astype(np.float32),
            -rng.uniform(0.5, 2.0, (channels, state)).astype(np.float32),
            rng.standard_normal((batch, state, seq)).astype(np.float32),
            rng.standard_normal((batch, state, seq)).astype(np.float32))


TUTORIALS = [
    Tutorial("tensor_add", tensor_add_kernel, tensor_add_b2, _normal((256, 1024), (256, 1024)),
             lambda a, b: a + b, grid=(2, 2)),
    Tutorial("transpose2d", transpose2d_b1, transpose2d_b2, _normal((P, F1 * F2)),
             transpose2d_ref),
    Tutorial("average_pool2d", avgpool_b1, avgpool_b2, _normal((P, 16, 24)), avgpool_ref),
    Tutorial("matmul_basic", matmul_basic_kernel, matmul_basic_b2, _normal((P, 64), (P, 512)),
             matmul_ref),
    Tutorial("matmul_tiled", matmul_tiled_kernel, matmul_tiled_b2,
             _normal((384, 256), (384, 1024)), matmul_ref, atol=1e-3),
    Tutorial("matmul_blocked", matmul_blocked_b1, matmul_blocked_b2,
             _normal((256, 512), (256, 2048)), matmul_ref, atol=1e-3),
    Tutorial("layernorm_v1", layernorm_v1_b1, layernorm_v1_b2,
             _normal((256, 384), (384,), (384,)), layernorm_ref),
    Tutorial("layernorm_v2", layernorm_kernel, layernorm_v2_b2,
             _normal((256, 384), (384,), (384,)), layernorm_ref, grid=(2,)),
    Tutorial("softmax", softmax_kernel, softmax_b2, _normal((256, 300)), softmax_ref,
             grid=(2,), rtol=1e-5, atol=1e-6),
    Tutorial("rmsnorm", rmsnorm_b1, rmsnorm_b2, _normal((384, 256), (256,)), rmsnorm_ref),
    Tutorial("fused_mamba", mamba_b1, mamba_b2, _mamba_inputs, mamba_ref),
    Tutorial("attention_v1", attention_v1_b1, attention_b2, _normal((P, P), (P, P), (P, P)),
             attention_ref),
    Tutorial("attention_v2", attention_v2_b1, attention_b2, _normal((P, P), (P, P), (P, P)),
             attention_ref),
    Tutorial("attention_v6", attention_v6_b1, attention_b2,
             _normal((P, 1024), (P, 1024), (1024, P)), attention_ref),
    Tutorial("flash_attention_fwd", flash_attention_kernel, flash_fwd_b2,
             _normal((256, 64), (512, 64), (512, 64)), flash_fwd_ref, grid=(2,)),
    Tutorial("flash_attention_bwd", flash_bwd_b1, flash_bwd_b2,
             _normal((256, 64), (256, 64), (256, 64), (256, 64)), flash_bwd_ref),
]
