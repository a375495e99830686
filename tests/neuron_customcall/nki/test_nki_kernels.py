"""NKI kernels written against the language, run on the emulator, checked against NumPy."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from neuron_customcall import nki
from neuron_customcall.nki import isa as nisa
from neuron_customcall.nki import language as nl

rng = np.random.default_rng(0)


def rand(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


# --- 1. tensor add on a 2-D grid (the seed's kernel) ------------------------------------------------

@nki.jit
def tensor_add_kernel(a_input, b_input):
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    ix = nl.program_id(0) * 128 + nl.arange(128)[:, None]
    iy = nl.program_id(1) * 512 + nl.arange(512)[None, :]
    a_tile = nl.load(a_input[ix, iy])
    b_tile = nl.load(b_input[ix, iy])
    nl.store(c_output[ix, iy], value=a_tile + b_tile)
    return c_output


def test_tensor_add_2d_grid():
    a, b = rand(256, 1024), rand(256, 1024)
    np.testing.assert_array_equal(tensor_add_kernel[2, 2](a, b), a + b)


def test_tensor_add_mgrid_and_simulate_kernel():
    @nki.jit
    def add_mgrid(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:512]
        ix = nl.program_id(0) * 128 + i_p
        iy = nl.program_id(1) * 512 + i_f
        nl.store(out[ix, iy], value=nl.add(nl.load(a[ix, iy]), nl.load(b[ix, iy])))
        return out

    a, b = rand(256, 1024), rand(256, 1024)
    np.testing.assert_array_equal(nki.simulate_kernel(add_mgrid[2, 2], a, b), a + b)


def test_traces_are_cached_per_signature_and_grid():
    a, b = rand(256, 1024), rand(256, 1024)
    tensor_add_kernel[2, 2](a, b)
    n = tensor_add_kernel.cache_size
    tensor_add_kernel[2, 2](a, b)
    assert tensor_add_kernel.cache_size == n
    tensor_add_kernel[1, 2](a[:128], b[:128])
    assert tensor_add_kernel.cache_size == n + 1


# --- 2. transpose ----------------------------------------------------------------------------------

@nki.jit
def transpose_kernel(x):
    m, n = x.shape
    out = nl.ndarray((n, m), dtype=x.dtype, buffer=nl.shared_hbm)
    i, j = nl.program_id(0), nl.program_id(1)
    tile = nl.load(x[i * 128 + nl.arange(128)[:, None], j * 128 + nl.arange(128)[None, :]])
    t = nl.transpose(tile)
    nl.store(out[j * 128 + nl.arange(128)[:, None], i * 128 + nl.arange(128)[None, :]], value=t)
    return out


def test_transpose():
    x = rand(256, 384)
    np.testing.assert_array_equal(transpose_kernel[2, 3](x), x.T)


# --- 3. average pool (strided affine loads) ---------------------------------------------------------

@nki.jit
def avgpool2x2_kernel(x):
    c, h, w = x.shape
    out = nl.ndarray((c, h // 2, w // 2), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_h, i_w = nl.mgrid[0:128, 0:h // 2, 0:w // 2]
    acc = nl.zeros((128, h // 2, w // 2), nl.float32)
    for dh in nl.static_range(2):
        for dw in nl.static_range(2):
            acc[...] = nl.add(acc, nl.load(x[i_p, 2 * i_h + dh, 2 * i_w + dw]))
    nl.store(out[i_p, i_h, i_w], value=nl.multiply(acc, 0.25))
    return out


def test_average_pool():
    x = rand(128, 16, 24)
    ref = x.reshape(128, 8, 2, 12, 2).mean(axis=(2, 4))
    np.testing.assert_allclose(avgpool2x2_kernel(x), ref, rtol=1e-6, atol=1e-6)


# --- 4/5. matmul: basic and tiled ---------------------------------------------------------------

@nki.jit
def matmul_basic_kernel(lhsT, rhs):
    k, m = lhsT.shape
    _, n = rhs.shape
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    res = nl.matmul(nl.load(lhsT), nl.load(rhs), transpose_x=True)
    nl.store(out, value=res)
    return out


def test_matmul_basic():
    lhsT, rhs = rand(128, 64), rand(128, 512)
    np.testing.assert_allclose(matmul_basic_kernel(lhsT, rhs), lhsT.T @ rhs, rtol=1e-4, atol=1e-4)


def test_matmul_without_transpose_x_and_isa():
    @nki.jit
    def mm(x, y):
        out = nl.ndarray((x.shape[0], y.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        xt = nl.load(x)
        yt = nl.load(y)
        a = nl.matmul(xt, yt)
        b = nisa.nc_matmul(nl.transpose(xt), yt)
        nl.store(out, value=nl.add(nl.copy(a), b))
        return out

    x, y = rand(96, 128), rand(128, 200)
    np.testing.assert_allclose(mm(x, y), 2 * (x @ y), rtol=1e-4, atol=1e-3)


@nki.jit
def matmul_tiled_kernel(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        for n in nl.affine_range(N // 512):
            res_psum = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                lhsT_tile = nl.load(lhsT[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
                rhs_tile = nl.load(rhs[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                res_psum += nl.matmul(lhsT_tile, rhs_tile, transpose_x=True)
            res_sb = nl.copy(res_psum, dtype=out.dtype)
            nl.store(out[m * 128:(m + 1) * 128, n * 512:(n + 1) * 512], value=res_sb)
    return out


def test_matmul_tiled():
    lhsT, rhs = rand(384, 256), rand(384, 1024)
    np.testing.assert_allclose(matmul_tiled_kernel(lhsT, rhs), lhsT.T @ rhs, rtol=1e-4, atol=1e-3)


# --- 6. softmax ------------------------------------------------------------------------------------

@nki.jit
def softmax_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows = nl.program_id(0) * 128 + nl.arange(128)[:, None]
    cols = nl.arange(x.shape[1])[None, :]
    t = nl.load(x[rows, cols])
    m = nl.max(t, axis=1, keepdims=True)
    e = nl.exp(nl.subtract(t, m))
    s = nl.sum(e, axis=1, keepdims=True)
    nl.store(out[rows, cols], value=nl.divide(e, s))
    return out


def np_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_softmax_manual_and_builtin():
    x = rand(512, 300)
    np.testing.assert_allclose(softmax_kernel[4](x), np_softmax(x), rtol=1e-5, atol=1e-6)

    @nki.jit
    def softmax2(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.softmax(nl.load(x), axis=1))
        return out

    np.testing.assert_allclose(softmax2(x[:128]), np_softmax(x[:128]), rtol=1e-5, atol=1e-6)


# --- 7. RMSNorm ------------------------------------------------------------------------------------

@nki.jit
def rmsnorm_kernel(x, w, eps):
    n, d = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    w_tile = nl.broadcast_to(nl.load(w.reshape((1, d))), (128, d))
    for i in nl.affine_range(n // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        ms = nl.mean(nl.square(t), axis=1, keepdims=True)
        r = nl.rsqrt(ms + eps)
        nl.store(out[i * 128:(i + 1) * 128, :], value=t * r * w_tile)
    return out


def test_rmsnorm():
    x, w = rand(384, 256), rand(256)
    ref = x / np.sqrt((x ** 2).mean(axis=1, keepdims=True) + 1e-5) * w
    np.testing.assert_allclose(rmsnorm_kernel(x, w, 1e-5), ref, rtol=1e-4, atol=1e-5)

    @nki.jit
    def rms2(x, w):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        wt = nl.load(w.reshape((1, x.shape[1])))
        nl.store(out, value=nl.rms_norm(t, wt, axis=1, n=x.shape[1], epsilon=1e-5))
        return out

    np.testing.assert_allclose(rms2(x[:128], w), ref[:128], rtol=1e-4, atol=1e-5)


# --- 8. layer norm with bn_stats -----------------------------------------------------------------

@nki.jit
def layernorm_kernel(x, gamma, beta):
    n, d = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    g = nl.load(gamma.reshape((1, d)))
    b = nl.load(beta.reshape((1, d)))
    rows = nl.program_id(0) * 128 + nl.arange(128)[:, None]
    cols = nl.arange(d)[None, :]
    t = nl.load(x[rows, cols])
    stats = nisa.bn_stats(t)
    mv = nisa.bn_aggr(stats)
    mean = mv[:, 0:1]
    var = mv[:, 1:2]
    inv = nisa.activation(nl.rsqrt, var, bias=1e-5)
    y = nisa.tensor_scalar(t, nl.subtract, mean, op1=nl.multiply, operand1=inv)
    nl.store(out[rows, cols], value=y * g + b)
    return out


def test_layernorm_bn_stats():
    x, g, b = rand(256, 384), rand(384), rand(384)
    mu = x.mean(axis=1, keepdims=True)
    ref = (x - mu) / np.sqrt(x.var(axis=1, keepdims=True) + 1e-5) * g + b
    np.testing.assert_allclose(layernorm_kernel[2](x, g, b), ref, rtol=1e-4, atol=1e-4)


# --- 9. attention with a causal mask ---------------------------------------------------------------

@nki.jit
def causal_attention_kernel(q, k, v):
    s, d = q.shape
    out = nl.ndarray((s, d), dtype=q.dtype, buffer=nl.shared_hbm)
    qt, kt, vt = nl.load(q), nl.load(k), nl.load(v)
    scores = nl.matmul(qt, nl.transpose(kt))          # [s_q, s_k] in PSUM
    scaled = nl.multiply(scores, 1.0 / np.sqrt(d))
    i_q = nl.arange(s)[:, None]
    i_k = nl.arange(s)[None, :]
    masked = nl.where(i_q >= i_k, scaled, -30000.0)
    probs = nl.softmax(masked, axis=1)
    nl.store(out, value=nl.matmul(probs, vt))
    return out


def test_attention_causal_mask():
    q, k, v = rand(128, 64), rand(128, 64), rand(128, 64)
    sc = q @ k.T / np.sqrt(64)
    sc = np.where(np.tril(np.ones((128, 128), bool)), sc, -30000.0)
    ref = np_softmax(sc) @ v
    np.testing.assert_allclose(causal_attention_kernel(q, k, v), ref, rtol=1e-4, atol=1e-4)


# --- 10. scan --------------------------------------------------------------------------------------

@nki.jit
def scan_kernel(a, x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    h = nisa.tensor_tensor_scan(nl.load(a), nl.load(x), 0.0, np.multiply, np.add)
    nl.store(out, value=h)
    return out


def test_scan_linear_recurrence():
    a, x = rng.uniform(0.5, 1.0, (128, 64)).astype(np.float32), rand(128, 64)
    ref = np.zeros_like(x)
    h = np.zeros(128, np.float32)
    for i in range(64):
        h = a[:, i] * h + x[:, i]
        ref[:, i] = h
    np.testing.assert_allclose(scan_kernel(a, x), ref, rtol=1e-5, atol=1e-5)


# --- 11. masked tail tile --------------------------------------------------------------------------

@nki.jit
def scale_rows_kernel(x):
    n, d = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.program_id(0) * 128 + nl.arange(128)[:, None]
    i_f = nl.arange(d)[None, :]
    t = nl.load(x[i_p, i_f], mask=(i_p < n))
    nl.store(out[i_p, i_f], value=nl.multiply(t, 2.0), mask=(i_p < n))
    return out


def test_masked_tail_tile():
    x = rand(300, 40)
    np.testing.assert_array_equal(scale_rows_kernel[3](x), 2 * x)


# --- 12/13. bfloat16 and fp8 inputs ------------------------------------------------------------

@nki.jit
def axpy_kernel(x, y):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows = nl.program_id(0) * 128 + nl.arange(128)[:, None]
    cols = nl.arange(x.shape[1])[None, :]
    nl.store(out[rows, cols], value=nl.load(x[rows, cols]) * 3.0 + nl.load(y[rows, cols]))
    return out


def test_bfloat16_inputs():
    x = rand(256, 64).astype(ml_dtypes.bfloat16)
    y = rand(256, 64).astype(ml_dtypes.bfloat16)
    out = axpy_kernel[2](x, y)
    assert out.dtype == ml_dtypes.bfloat16
    ref = x.astype(np.float32) * 3 + y.astype(np.float32)
    np.testing.assert_allclose(out.astype(np.float32), ref, rtol=2e-2, atol=2e-2)


@nki.jit
def fp8_dequant_kernel(x, scale):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.copy(nl.load(x), dtype=nl.float32)
    s = nl.load(scale)
    nl.store(out, value=nl.multiply(t, s))
    return out


@pytest.mark.parametrize("fp8", [ml_dtypes.float8_e4m3, ml_dtypes.float8_e5m2])
def test_fp8_inputs(fp8):
    x = rand(128, 32).astype(fp8)
    scale = rng.uniform(0.5, 2, (128, 1)).astype(np.float32)
    np.testing.assert_array_equal(fp8_dequant_kernel(x, scale), x.astype(np.float32) * scale)


def test_dtype_promotion():
    from neuron_customcall.nki.dtypes import promote

    assert promote("float16", "bfloat16") == "float32"
    assert promote("int8", "uint8") == "int16"
    assert promote("float8_e4m3", "float8_e5m2") == "bfloat16"
    assert promote("int32", "bfloat16") == "bfloat16"
    assert promote("bool", "int8") == "int8"

    @nki.jit
    def mixed(a, b):
        out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        s = nl.add(nl.load(a), nl.load(b))
        assert s.dtype == np.float32
        nl.store(out, value=s)
        return out

    a = rand(8, 8).astype(np.float16)
    b = rand(8, 8).astype(ml_dtypes.bfloat16)
    np.testing.assert_allclose(mixed(a, b), a.astype(np.float32) + b.astype(np.float32),
                               rtol=1e-6)


# --- more of the language -----------------------------------------------------------------------

def test_elementwise_reductions_and_where():
    @nki.jit
    def many(x):
        out = nl.ndarray((x.shape[0], 8), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        cols = [nl.sum(t, axis=1, keepdims=True), nl.max(t, axis=1, keepdims=True),
                nl.min(t, axis=1, keepdims=True), nl.mean(t, axis=1, keepdims=True),
                nl.var(t, axis=1, keepdims=True),
                nl.sum(nl.where(t > 0, t, 0.0), axis=1, keepdims=True),
                nl.sum(nl.sigmoid(t), axis=1, keepdims=True),
                nl.sum(nl.abs(nl.tanh(t)), axis=1, keepdims=True)]
        for j, c in enumerate(cols):
            nl.store(out[:, j:j + 1], value=c)
        return out

    x = rand(64, 48)
    ref = np.stack([x.sum(1), x.max(1), x.min(1), x.mean(1), x.var(1),
                    np.where(x > 0, x, 0).sum(1), (1 / (1 + np.exp(-x))).sum(1),
                    np.abs(np.tanh(x)).sum(1)], axis=1)
    np.testing.assert_allclose(many(x), ref, rtol=1e-5, atol=1e-5)


def test_sequential_range_carries_state():
    @nki.jit
    def prefix_sum_of_tiles(x):
        n, d = x.shape
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        acc = nl.zeros((128, d), nl.float32)
        for i in nl.sequential_range(n // 128):
            acc[...] = nl.add(acc, nl.load(x[i * 128:(i + 1) * 128, :]))
            nl.store(out[i * 128:(i + 1) * 128, :], value=acc)
        return out

    x = rand(512, 16)
    ref = np.cumsum(x.reshape(4, 128, 16), axis=0).reshape(512, 16)
    np.testing.assert_allclose(prefix_sum_of_tiles(x), ref, rtol=1e-5, atol=1e-5)


def test_iota_program_id_and_num_programs():
    @nki.jit
    def ids(x):
        out = nl.ndarray((nl.num_programs(0) * 4, 8), dtype=nl.int32, buffer=nl.shared_hbm)
        i_p = nl.arange(4)[:, None]
        i_f = nl.arange(8)[None, :]
        v = nisa.iota(nl.program_id(0) * 100 + i_p * 10 + i_f, nl.int32)
        nl.store(out[nl.program_id(0) * 4 + i_p, i_f], value=v)
        assert nl.program_ndim() == 1
        return out

    got = ids[3](np.zeros(1, np.float32))
    p, i, f = np.meshgrid(np.arange(3), np.arange(4), np.arange(8), indexing="ij")
    np.testing.assert_array_equal(got, (p * 100 + i * 10 + f).reshape(12, 8))


def test_in_place_kernel_writes_its_argument():
    @nki.jit
    def inc(x):
        nl.store(x, value=nl.add(nl.load(x), 1.0))

    x = np.zeros((4, 4), np.float32)
    assert inc(x) is None
    np.testing.assert_array_equal(x, 1.0)


# --- flash-attention style: online softmax over key blocks in a sequential loop ---------------

@nki.jit
def flash_attention_kernel(q, k, v):
    s_q, d = q.shape
    s_k = k.shape[0]
    out = nl.ndarray((s_q, d), dtype=nl.float32, buffer=nl.shared_hbm)
    qt = nl.load(q[nl.ds(nl.program_id(0) * 128, 128), :])
    m = nl.full((128, 1), -1e30, nl.float32)
    l = nl.zeros((128, 1), nl.float32)
    o = nl.zeros((128, d), nl.float32)
    for j in nl.sequential_range(s_k // 128):
        kt = nl.load(k[nl.ds(j * 128, 128), :])
        vt = nl.load(v[nl.ds(j * 128, 128), :])
        s = nl.multiply(nl.matmul(qt, nl.transpose(kt)), 1.0 / np.sqrt(d))
        m_new = nl.maximum(m, nl.max(s, axis=1, keepdims=True))
        p = nl.exp(nl.subtract(s, m_new))
        corr = nl.exp(nl.subtract(m, m_new))
        l[...] = nl.add(nl.multiply(l, corr), nl.sum(p, axis=1, keepdims=True))
        o[...] = nl.add(nl.multiply(o, corr), nl.copy(nl.matmul(p, vt)))
        m[...] = m_new
    nl.store(out[nl.ds(nl.program_id(0) * 128, 128), :], value=nl.divide(o, l))
    return out


def test_flash_attention_online_softmax():
    q, k, v = rand(256, 64), rand(512, 64), rand(512, 64)
    ref = np_softmax(q @ k.T / np.sqrt(64)) @ v
    np.testing.assert_allclose(flash_attention_kernel[2](q, k, v), ref, rtol=1e-4, atol=1e-4)
