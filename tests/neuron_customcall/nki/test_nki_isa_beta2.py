"""NKI beta 2's ``nki.isa`` (``neuron_customcall.nki.isa.beta2``): every instruction takes ``dst``
first and writes into it. Each test writes a kernel as the beta-2 reference shows it (tiles
allocated with ``nl.ndarray``, moved with ``nisa.dma_copy``) and checks it against NumPy, on
grids and in loops so that the batch axes are exercised; a few compare with the beta-1 form."""
from __future__ import annotations

import numpy as np
import pytest

from emulator.kernel_ir import format_kernel
from neuron_customcall import nki
from neuron_customcall.nki import isa as nisa1
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import NkiValidationError
from neuron_customcall.nki.isa import beta2 as nisa

RNG = np.random.default_rng(2026)


def _sb(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)


def _unary_kernel(body, out_shape, out_dtype=np.float32):
    """A kernel loading [128, F] blocks of ``x`` (one per program), running ``body(dst, x_tile)``
    and storing ``dst`` ([128, ...] of ``out_shape[1:]``) for each block."""
    @nki.jit
    def k(x):
        out = nl.ndarray((x.shape[0],) + tuple(out_shape[1:]), dtype=out_dtype,
                         buffer=nl.shared_hbm)
        i = nl.program_id(0)
        t = _sb((128, x.shape[1]), x.dtype)
        nisa.dma_copy(dst=t, src=x[i * 128:(i + 1) * 128, :])
        d = _sb((128,) + tuple(out_shape[1:]), out_dtype)
        body(d, t)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128], src=d)
        return out
    return k


@pytest.mark.parametrize("grid", [1, 3])
def test_activation_scale_and_bias_into_dst(grid):
    x = RNG.standard_normal((128 * grid, 64)).astype(np.float32)

    def body(d, t):
        bias = _sb((128, 1))
        nisa.memset(bias, 0.5)
        nisa.activation(d, nl.exp, t, bias=bias, scale=2.0)

    got = _unary_kernel(body, (128, 64))[grid](x)
    np.testing.assert_allclose(got, np.exp(x * 2 + 0.5), rtol=1e-6)


def test_tensor_tensor_tensor_scalar_and_reciprocal():
    a = RNG.standard_normal((128, 32)).astype(np.float32)
    b = RNG.uniform(1, 2, (128, 32)).astype(np.float32)

    @nki.jit
    def k(a, b):
        out = nl.ndarray((3, 128, 32), nl.float32, buffer=nl.shared_hbm)
        ta, tb = _sb((128, 32)), _sb((128, 32))
        nisa.dma_copy(ta, a)
        nisa.dma_copy(tb, b)
        s, q, r = _sb((128, 32)), _sb((128, 32)), _sb((128, 32))
        nisa.tensor_tensor(s, ta, tb, nl.subtract)
        nisa.tensor_scalar(q, ta, nl.multiply, 3.0, op1=nl.subtract, operand1=1.0, reverse1=True)
        nisa.reciprocal(r, tb)
        for j, t in enumerate((s, q, r)):
            nisa.dma_copy(out[j], t)
        return out

    got = k(a, b)
    np.testing.assert_allclose(got[0], a - b)
    np.testing.assert_allclose(got[1], 1.0 - a * 3.0, rtol=1e-6)
    np.testing.assert_allclose(got[2], 1.0 / b, rtol=1e-6)


@pytest.mark.parametrize("keepdims", [False, True])
def test_tensor_reduce_negate_into_a_column(keepdims):
    x = RNG.standard_normal((256, 4, 16)).astype(np.float32)

    @nki.jit
    def k(x):
        out = nl.ndarray((256, 1), nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            t = _sb((128, 4, 16))
            nisa.dma_copy(t, x[i * 128:(i + 1) * 128])
            d = _sb((128, 1, 1) if keepdims else (128,))
            nisa.tensor_reduce(d, nl.add, t, axis=(1, 2), negate=True, keepdims=keepdims)
            nisa.dma_copy(out[i * 128:(i + 1) * 128, :], d)
        return out

    np.testing.assert_allclose(k(x), -x.sum(axis=(1, 2))[:, None], rtol=1e-5)


def test_tensor_copy_memset_iota_and_transpose():
    x = RNG.standard_normal((32, 16)).astype(np.float32)

    @nki.jit
    def k(x):
        out = nl.ndarray((4, 32, 16), nl.float32, buffer=nl.shared_hbm)
        t = _sb((32, 16))
        nisa.dma_copy(t, x)
        c, m = _sb((32, 16), nl.bfloat16), _sb((32, 16))
        nisa.tensor_copy(c, t)
        nisa.memset(m, 7.0)
        io = _sb((32, 16), nl.int32)
        nisa.iota(io, [[1, 16]], offset=3, channel_multiplier=100)
        tt = _sb((16, 32))
        nisa.nc_transpose(tt, t, engine=nisa.engine.vector)
        back = nl.ndarray((32, 16), nl.float32, buffer=nl.psum)
        nisa.nc_transpose(back, tt)
        b2 = _sb((32, 16))
        nisa.tensor_copy(b2, back)
        for j, v in enumerate((c, m, io, b2)):
            nisa.dma_copy(out[j], v)
        return out

    got = k(x)
    np.testing.assert_array_equal(got[0], x.astype(nl.bfloat16).astype(np.float32))
    np.testing.assert_array_equal(got[1], 7.0)
    np.testing.assert_array_equal(got[2], 3 + 100 * np.arange(32)[:, None] + np.arange(16))
    np.testing.assert_array_equal(got[3], x)


def test_nc_matmul_into_psum_and_tiled_accumulation():
    """accumulate=None: the first matmul into a fresh PSUM tile overwrites, the loop's later ones
    add; accumulate=(k > 0) says the same explicitly; accumulate=False overwrites each time."""
    a = RNG.standard_normal((512, 64)).astype(np.float32)   # [K, M]: stationary
    b = RNG.standard_normal((512, 96)).astype(np.float32)   # [K, N]: moving

    def make(mode):
        @nki.jit
        def k(a, b):
            out = nl.ndarray((64, 96), nl.float32, buffer=nl.shared_hbm)
            acc = nl.ndarray((64, 96), nl.float32, buffer=nl.psum)
            for kk in nl.affine_range(4):
                st, mv = _sb((128, 64)), _sb((128, 96))
                nisa.dma_copy(st, a[kk * 128:(kk + 1) * 128])
                nisa.dma_copy(mv, b[kk * 128:(kk + 1) * 128])
                if mode == "auto":
                    nisa.nc_matmul(acc, st, mv)
                elif mode == "pred":
                    nisa.nc_matmul(acc, st, mv, accumulate=kk > 0)
                else:
                    nisa.nc_matmul(acc, st, mv, accumulate=False)
            res = _sb((64, 96))
            nisa.tensor_copy(res, acc)
            nisa.dma_copy(out, res)
            return out
        return k

    full = a.T @ b
    np.testing.assert_allclose(make("auto")(a, b), full, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(make("pred")(a, b), full, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(make("overwrite")(a, b), a[384:].T @ b[384:], rtol=1e-4,
                               atol=1e-4)


def test_nc_matmul_auto_accumulate_starts_from_zero_each_outer_iteration_of_a_fresh_tile():
    a = RNG.standard_normal((256, 2, 32)).astype(np.float32)
    b = RNG.standard_normal((256, 2, 16)).astype(np.float32)

    @nki.jit
    def k(a, b):
        out = nl.ndarray((2, 32, 16), nl.float32, buffer=nl.shared_hbm)
        for m in nl.affine_range(2):
            acc = nl.ndarray((32, 16), nl.float32, buffer=nl.psum)
            for kk in nl.affine_range(2):
                st, mv = _sb((128, 32)), _sb((128, 16))
                nisa.dma_copy(st, a[kk * 128:(kk + 1) * 128, m, :])
                nisa.dma_copy(mv, b[kk * 128:(kk + 1) * 128, m, :])
                nisa.nc_matmul(acc, st, mv)
            res = _sb((32, 16))
            nisa.tensor_copy(res, acc)
            nisa.dma_copy(out[m], res)
        return out

    got = k(a, b)
    for m in range(2):
        np.testing.assert_allclose(got[m], a[:, m].T @ b[:, m], rtol=1e-4, atol=1e-4)


def test_bn_stats_bn_aggr_max8_scan_and_partition_reduce():
    x = RNG.standard_normal((128, 40)).astype(np.float32)
    y = RNG.uniform(0.5, 1.0, (128, 40)).astype(np.float32)

    @nki.jit
    def k(x, y):
        stats_out = nl.ndarray((128, 2), nl.float32, buffer=nl.shared_hbm)
        top_out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
        scan_out = nl.ndarray((128, 40), nl.float32, buffer=nl.shared_hbm)
        col_out = nl.ndarray((1, 40), nl.float32, buffer=nl.shared_hbm)
        t, u = _sb((128, 40)), _sb((128, 40))
        nisa.dma_copy(t, x)
        nisa.dma_copy(u, y)
        st, ag = _sb((128, 6)), _sb((128, 2))
        nisa.bn_stats(st, t)
        nisa.bn_aggr(ag, st)
        top = _sb((128, 8))
        nisa.max8(top, t)
        sc = _sb((128, 40))
        nisa.tensor_tensor_scan(sc, u, t, 1.0, nl.multiply, nl.subtract)
        col = _sb((1, 40))
        nisa.tensor_partition_reduce(col, nl.maximum, t)
        for o, v in ((stats_out, ag), (top_out, top), (scan_out, sc), (col_out, col)):
            nisa.dma_copy(o, v)
        return stats_out, top_out, scan_out, col_out

    stats, top, scan, col = k(x, y)
    np.testing.assert_allclose(stats[:, 0], x.mean(1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(stats[:, 1], x.var(1), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(top, -np.sort(-x, 1)[:, :8])
    want = np.empty_like(x)
    prev = np.ones(128, np.float32)
    for i in range(40):
        prev = y[:, i] * prev - x[:, i]   # op1(op0(data0, prev), data1): data0 left of op0
        want[:, i] = prev
    np.testing.assert_allclose(scan, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(col, x.max(0, keepdims=True))


def test_tensor_tensor_scan_reverse_flags_and_beta1_order():
    """``reverse0``/``reverse1`` swap the operands of op0/op1; beta 1 has the same order."""
    x = RNG.uniform(1, 2, (16, 12)).astype(np.float32)
    y = RNG.uniform(1, 2, (16, 12)).astype(np.float32)

    @nki.jit
    def k(x, y):
        out = nl.ndarray((2, 16, 12), nl.float32, buffer=nl.shared_hbm)
        a, b = nl.load(x), nl.load(y)
        nl.store(out[0], nisa1.tensor_tensor_scan(a, b, 0.5, nl.subtract, nl.divide,
                                                  reverse0=True, reverse1=True))
        nl.store(out[1], nisa1.tensor_tensor_scan(a, b, 0.5, nl.subtract, nl.divide))
        return out

    got = k(x, y)
    for j, (r0, r1) in enumerate(((True, True), (False, False))):
        prev = np.full(16, 0.5, np.float32)
        want = np.empty_like(x)
        for i in range(12):
            a = prev - x[:, i] if r0 else x[:, i] - prev
            prev = y[:, i] / a if r1 else a / y[:, i]
            want[:, i] = prev
        np.testing.assert_allclose(got[j], want, rtol=1e-5)


def test_scalar_tensor_tensor_and_affine_select_pattern():
    x = RNG.standard_normal((64, 64)).astype(np.float32)
    y = RNG.standard_normal((64, 64)).astype(np.float32)

    @nki.jit
    def k(x, y):
        out = nl.ndarray((2, 64, 64), nl.float32, buffer=nl.shared_hbm)
        a, b = _sb((64, 64)), _sb((64, 64))
        nisa.dma_copy(a, x)
        nisa.dma_copy(b, y)
        s = _sb((64, 64))
        nisa.scalar_tensor_tensor(s, a, nl.multiply, 2.0, nl.subtract, b, reverse1=True)
        causal = _sb((64, 64))
        # keep where p - f >= 0 (lower triangle), else -1e9
        nisa.affine_select(causal, [[-1, 64]], 1, a, -1e9, cmp_op=nl.greater_equal)
        nisa.dma_copy(out[0], s)
        nisa.dma_copy(out[1], causal)
        return out

    got = k(x, y)
    np.testing.assert_allclose(got[0], y - x * 2.0, rtol=1e-6)
    p, f = np.mgrid[0:64, 0:64]
    np.testing.assert_array_equal(got[1], np.where(p - f >= 0, x, np.float32(-1e9)))


@pytest.mark.parametrize("cmp, fn", [("equal", np.equal), ("less", np.less),
                                     ("not_equal", np.not_equal)])
def test_affine_select_pattern_comparisons_and_regrouped_patterns(cmp, fn):
    x = RNG.standard_normal((8, 24)).astype(np.float32)

    @nki.jit
    def k(x):
        out = nl.ndarray((8, 24), nl.float32, buffer=nl.shared_hbm)
        a, d = _sb((8, 24)), _sb((8, 24))
        nisa.dma_copy(a, x)
        # a pattern of 2 x 12 over a [8, 24] tile: value = 5 - 2 * p + 3 * w + x
        nisa.affine_select(d, [[3, 2], [1, 12]], -2, a, 0.0, cmp_op=getattr(nl, cmp), offset=5)
        nisa.dma_copy(out, d)
        return out

    p = np.arange(8)[:, None, None]
    w, xx = np.arange(2)[None, :, None], np.arange(12)[None, None, :]
    value = (5 - 2 * p + 3 * w + xx).reshape(8, 24)
    np.testing.assert_array_equal(k(x), np.where(fn(value, 0), x, 0.0))


def test_dst_shape_must_match_the_result():
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 4), nl.float32, buffer=nl.shared_hbm)
        t, d = _sb((128, 8)), _sb((128, 4))
        nisa.dma_copy(t, x)
        nisa.tensor_tensor(d, t, t, nl.add)
        nisa.dma_copy(out, d)
        return out

    with pytest.raises(NkiValidationError, match=r"dst shape.*\[128, 4\].*\[128, 8\]"):
        k(np.zeros((128, 8), np.float32))


def test_writing_into_dst_adds_no_copy():
    """The instruction targets the view itself: one activation writing the tile, nothing else;
    a tile allocated just before its first whole write is that write's result (no NaN fill)."""
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
        t = _sb((128, 8))
        nisa.dma_copy(t, x)
        d = _sb((128, 8))
        nisa.activation(d, nl.tanh, t)
        nisa.dma_copy(out, d)
        return out

    x = RNG.standard_normal((128, 8)).astype(np.float32)
    np.testing.assert_allclose(k(x), np.tanh(x), rtol=1e-6)
    ir = nki.trace_kernel(k.func, [nki.TensorSpec((128, 8), "float32")]).ir
    ops = [s.op for s in ir.body]
    assert ops == ["load", "activation", "store"], format_kernel(ir)  # allocs became results


@pytest.mark.parametrize("which, rule", [("transpose", "dst has data's dtype"),
                                         ("predicated", "src and dst share one dtype")])
def test_dtype_rules_of_the_reference(which, rule):
    @nki.jit
    def k(x):
        t = nl.load(x)
        if which == "transpose":
            d = _sb((16, 16), nl.bfloat16)
            nisa.nc_transpose(d, t)
        else:
            d, p = _sb((16, 16), nl.bfloat16), _sb((16, 16), nl.uint8)
            nisa.memset(p, 1)
            nisa.tensor_copy_predicated(d, t, p)
        return x

    with pytest.raises(NkiValidationError, match=rule):
        k(np.zeros((16, 16), np.float32))
