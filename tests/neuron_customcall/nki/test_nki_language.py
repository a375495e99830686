"""More of nl / nisa: each construct traced and run against NumPy."""

from __future__ import annotations

import numpy as np

from neuron_customcall import nki
from neuron_customcall.nki import isa as nisa
from neuron_customcall.nki import language as nl

rng = np.random.default_rng(1)


def rand(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def out_like(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.shared_hbm)


def test_grid_tiled_matmul_with_k_loop_and_ds():
    @nki.jit
    def mm(lhsT, rhs):
        K, M = lhsT.shape
        N = rhs.shape[1]
        out = out_like((M, N))
        m, n = nl.program_id(0), nl.program_id(1)
        acc = nl.zeros((128, 256), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(K // 128):
            a = nl.load(lhsT[nl.ds(k * 128, 128), nl.ds(m * 128, 128)])
            b = nl.load(rhs[nl.ds(k * 128, 128), nl.ds(n * 256, 256)])
            acc += nisa.nc_matmul(a, b)
        nl.store(out[nl.ds(m * 128, 128), nl.ds(n * 256, 256)], value=acc)
        return out

    lhsT, rhs = rand(512, 256), rand(512, 512)
    np.testing.assert_allclose(mm[2, 2](lhsT, rhs), lhsT.T @ rhs, rtol=1e-4, atol=1e-3)


def test_load_transpose2d_identity_and_expand_dims():
    @nki.jit
    def k(x):
        out = out_like((64, 128))
        t = nl.load_transpose2d(x)
        eye = nl.load(nl.shared_identity_matrix(64, dtype=nl.float32))  # the default is uint8
        via_mm = nl.matmul(eye, t)              # I @ x.T
        col = nl.expand_dims(nl.sum(t, axis=1), 1)  # [64] -> [64, 1]
        nl.store(out, value=nl.add(nl.copy(via_mm), col))
        return out

    x = rand(128, 64)
    np.testing.assert_allclose(k(x), x.T + x.T.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-4)


def test_isa_ops_iota_memset_affine_select_reduce_negate_activation_scale():
    @nki.jit
    def k(x):
        out = out_like((128, 4))
        t = nl.load(x)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(32)[None, :]
        iota = nisa.iota(i_p * 32 + i_f, nl.float32)
        ones = nisa.memset((128, 32), 1.0, nl.float32)
        upper = nisa.affine_select(i_f - i_p >= 0, ones, 0.0)       # 1 where f >= p
        neg_max = nisa.tensor_reduce(np.maximum, t, axis=1, negate=True, keepdims=True)
        act = nisa.activation(nl.exp, t, bias=neg_max, scale=1.0)
        scaled = nisa.activation(nl.copy, t, scale=2.0)
        cols = [nl.sum(iota, axis=1, keepdims=True), nl.sum(upper, axis=1, keepdims=True),
                nl.sum(act, axis=1, keepdims=True), nl.sum(scaled, axis=1, keepdims=True)]
        for j, c in enumerate(cols):
            nl.store(out[:, j:j + 1], value=c)
        return out

    x = rand(128, 32)
    p, f = np.meshgrid(np.arange(128), np.arange(32), indexing="ij")
    ref = np.stack([(p * 32 + f).sum(1), (f >= p).sum(1),
                    np.exp(x - x.max(1, keepdims=True)).sum(1), (2 * x).sum(1)], axis=1)
    np.testing.assert_allclose(k(x), ref, rtol=1e-5, atol=1e-4)


def test_masked_compute_and_integer_ops():
    @nki.jit
    def k(a, b):
        out = out_like(a.shape, nl.int32)
        ta, tb = nl.load(a), nl.load(b)
        i_f = nl.arange(a.shape[1])[None, :]
        r = nl.ndarray(a.shape, nl.int32)
        r[...] = 0
        r[...] = nl.bitwise_xor(ta, tb)
        shifted = nl.left_shift(ta, 1, mask=(i_f < 4))        # only the first 4 columns
        r[:, 0:4] = shifted[:, 0:4]
        nl.store(out, value=nl.maximum(r, nl.minimum(ta, tb)))
        return out

    a = rng.integers(0, 100, (8, 10)).astype(np.int32)
    b = rng.integers(0, 100, (8, 10)).astype(np.int32)
    ref = a ^ b
    ref[:, :4] = a[:, :4] << 1
    np.testing.assert_array_equal(k(a, b), np.maximum(ref, np.minimum(a, b)))


def test_integer_index_drops_an_axis_and_reshape_splits_one():
    @nki.jit
    def k(x):
        out = out_like((4, 8))
        row = nl.load(x[1])                     # integer index: a 1-D [32] tile
        assert row.shape == (32,)
        t = nl.load(x.reshape((2, 4, 8))[1])    # split axis: [4, 8] = x[1].reshape(4, 8)
        nl.store(out, value=t)
        return out

    x = rand(2, 32)
    np.testing.assert_array_equal(k(x), x[1].reshape(4, 8))


def test_private_hbm_scratch_and_zeros_like():
    @nki.jit
    def k(x):
        out = out_like(x.shape)
        scratch = nl.ndarray(x.shape, nl.float32, buffer=nl.hbm)
        nl.store(scratch, value=nl.multiply(nl.load(x), 3.0))
        z = nl.zeros_like(nl.load(x))
        nl.store(out, value=nl.add(nl.load(scratch), z))
        return out

    x = rand(16, 16)
    np.testing.assert_allclose(k[2](x), 3 * x)


def test_prod_all_and_comparisons():
    @nki.jit
    def k(x):
        out = out_like((x.shape[0], 2))
        t = nl.load(x)
        nl.store(out[:, 0:1], value=nl.prod(t, axis=1, keepdims=True))
        nl.store(out[:, 1:2], value=nl.copy(nl.all(nl.greater(t, 0.0), axis=1, keepdims=True),
                                             dtype=nl.float32))
        return out

    x = rng.uniform(0.5, 1.5, (16, 6)).astype(np.float32)
    x[3, 2] = -1
    np.testing.assert_allclose(k(x), np.stack([x.prod(1), (x > 0).all(1)], 1), rtol=1e-5)


def _np_erf(x):
    from math import erf
    return np.vectorize(erf)(x.astype(np.float64))


UNARY_REFS = {
    "abs": np.abs, "negative": np.negative, "sign": np.sign, "trunc": np.trunc,
    "floor": np.floor, "ceil": np.ceil, "exp": np.exp, "cos": np.cos, "sin": np.sin,
    "tan": np.tan, "tanh": np.tanh, "arctan": np.arctan, "square": np.square,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "relu": lambda x: np.maximum(x, 0),
    "silu": lambda x: x / (1 + np.exp(-x)), "softplus": lambda x: np.log1p(np.exp(x)),
    "mish": lambda x: x * np.tanh(np.log1p(np.exp(x))), "erf": _np_erf,
    "erf_dx": lambda x: 2 / np.sqrt(np.pi) * np.exp(-x * x),
    "gelu": lambda x: 0.5 * x * (1 + _np_erf(x / np.sqrt(2))),
    "gelu_apprx_tanh": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
    "silu_dx": lambda x: (1 / (1 + np.exp(-x))) * (1 + x * (1 - 1 / (1 + np.exp(-x)))),
    "gelu_dx": lambda x: 0.5 * (1 + _np_erf(x / np.sqrt(2))) + x * np.exp(-x * x / 2) / np.sqrt(2 * np.pi),
}
POSITIVE_REFS = {"log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
                 "reciprocal": np.reciprocal}


def test_every_unary_function_matches_numpy():
    names = sorted(UNARY_REFS) + sorted(POSITIVE_REFS)

    @nki.jit
    def k(x, p):
        out = out_like((len(names),) + x.shape)
        tx, tp = nl.load(x), nl.load(p)
        for i, name in enumerate(names):
            src = tp if name in POSITIVE_REFS else tx
            nl.store(out[i], value=getattr(nl, name)(src))
        return out

    x = rand(8, 16) * 2
    p = rng.uniform(0.1, 3, (8, 16)).astype(np.float32)
    got = k(x, p)
    for i, name in enumerate(names):
        ref = (POSITIVE_REFS.get(name) or UNARY_REFS[name])(p if name in POSITIVE_REFS else x)
        np.testing.assert_allclose(got[i], ref, rtol=2e-5, atol=2e-6, err_msg=name)


def test_par_dim_psum_buffers_and_atomic_rmw():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(x))
        ps = nl.ndarray((nl.par_dim(128), 64), nl.float32, buffer=nl.psum)
        ps[...] = nl.multiply(nl.load(x), 2.0)
        nl.atomic_rmw(out, value=ps, op=nl.add)
        return out

    x = rand(128, 64)
    np.testing.assert_allclose(k(x), 3 * x, rtol=1e-6)


def test_masked_result_leaves_the_rest_uninitialised():
    @nki.jit
    def k(x):
        out = out_like(x.shape)
        i_f = nl.arange(x.shape[1])[None, :]
        nl.store(out, value=nl.multiply(nl.load(x), 2.0, mask=(i_f < 3)))
        return out

    got = k(np.ones((4, 6), np.float32))
    assert (got[:, :3] == 2).all() and np.isnan(got[:, 3:]).all()


def test_ranges_with_start_and_step():
    @nki.jit
    def k(x):
        out = out_like((128, x.shape[1]))
        acc = nl.zeros((128, x.shape[1]), nl.float32, buffer=nl.psum)
        for i in nl.affine_range(1, x.shape[0] // 128, 2):   # row tiles 1 and 3
            acc += nl.load(x[i * 128:(i + 1) * 128, :])
        nl.store(out, value=acc)
        return out

    x = rand(512, 8)
    np.testing.assert_allclose(k(x), x[128:256] + x[384:512], rtol=1e-6)


def test_indexed_in_place_accumulation_stays_vectorised(caplog):
    import logging

    @nki.jit
    def k(x):
        out = out_like((128, 8))
        acc = nl.zeros((128, 8), nl.float32, buffer=nl.psum)
        for i in nl.affine_range(x.shape[0] // 128):
            acc[:, :] += nl.load(x[i * 128:(i + 1) * 128, :])
        nl.store(out, value=acc)
        return out

    x = rand(512, 8)
    with caplog.at_level(logging.DEBUG, logger="emulator.kernel_exec"):
        got = k(x)
    np.testing.assert_allclose(got, x.reshape(4, 128, 8).sum(0), rtol=1e-5, atol=1e-5)
    assert "Python loop" not in caplog.text


def test_scalar_tensor_tensor_and_partition_reduce():
    @nki.jit
    def k(x, y):
        out = out_like((1, x.shape[1]))
        s = nisa.scalar_tensor_tensor(data=nl.load(x), op0=np.multiply, operand0=2.0,
                                      op1=np.add, operand1=nl.load(y))
        nl.store(out, value=nisa.tensor_partition_reduce(np.maximum, s))
        return out

    x, y = rand(128, 16), rand(128, 16)
    np.testing.assert_allclose(k(x, y), (2 * x + y).max(axis=0, keepdims=True), rtol=1e-6)


def test_nc_transpose_on_both_engines_and_jit_with_options():
    @nki.jit(mode="auto")
    def k(x, y):
        out_x = out_like((x.shape[1], x.shape[0]))
        out_y = out_like((y.shape[1], y.shape[0]))
        tx = nisa.nc_transpose(nl.load(x))                   # 128x64: TensorE, into PSUM
        ty = nisa.nc_transpose(nl.load(y), engine="vector")  # 16x32: VectorE, into SBUF
        assert tx.buffer == nl.psum and ty.buffer == nl.sbuf
        nl.store(out_x, value=tx)
        nl.store(out_y, value=ty)
        return out_x, out_y

    x, y = rand(128, 64), rand(16, 32)
    gx, gy = k(x, y)
    np.testing.assert_array_equal(gx, x.T)
    np.testing.assert_array_equal(gy, y.T)


def test_rand_and_dropout():
    @nki.jit
    def k(x):
        out = out_like((2,) + x.shape)
        nl.store(out[0], value=nl.rand(x.shape))
        nl.store(out[1], value=nl.dropout(nl.load(x), 0.25))
        return out

    x = np.ones((128, 256), np.float32)
    a, b = k[2](x)
    assert ((a >= 0) & (a < 1)).all() and 0.45 < a.mean() < 0.55
    assert set(np.unique(b)) <= {0.0, 1.0} and 0.7 < b.mean() < 0.8
    np.testing.assert_array_equal(k[2](x)[1], b)  # reproducible


def test_bitcast_view_of_a_tile():
    @nki.jit
    def k(x):
        out = out_like(x.shape, nl.int32)
        nl.store(out, value=nl.load(x).view(nl.int32))
        return out

    x = rand(4, 8)
    np.testing.assert_array_equal(k(x), x.view(np.int32))


def test_three_d_grid_tuple_results_load_dtype_and_python_range():
    import ml_dtypes

    @nki.jit
    def k3(x):
        out = out_like(x.shape)
        a, b, c = nl.program_id(0), nl.program_id(1), nl.program_id(2)
        i = nl.arange(4)[:, None]
        j = nl.arange(8)[None, :]
        t = nl.load(x[a * 4 + i, b * 8 + j, c])
        nl.store(out[a * 4 + i, b * 8 + j, c], value=t * 2.0 + nl.num_programs(2))
        return out

    x = rand(8, 16, 3)
    np.testing.assert_allclose(k3[2, 2, 3](x), x * 2 + 3, rtol=1e-6)

    @nki.jit
    def two(x):
        o1, o2 = out_like(x.shape), out_like(x.shape, nl.bfloat16)
        t = nl.load(x, dtype=nl.bfloat16)
        for i in range(2):  # Python range: unrolled while tracing
            nl.store((o1, o2)[i], value=t)
        return o1, o2

    a, b = two(x[:, :, 0])
    assert b.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(a, x[:, :, 0].astype(ml_dtypes.bfloat16).astype(np.float32))


def test_bfloat16_matmul_accumulates_in_fp32():
    import ml_dtypes

    @nki.jit
    def mm(a, b):
        out = out_like((a.shape[1], b.shape[1]))
        nl.store(out, value=nisa.nc_matmul(nl.load(a), nl.load(b)))
        return out

    a = rand(128, 64).astype(ml_dtypes.bfloat16)
    b = rand(128, 256).astype(ml_dtypes.bfloat16)
    np.testing.assert_allclose(mm(a, b), a.astype(np.float32).T @ b.astype(np.float32),
                               rtol=1e-5, atol=1e-4)


def test_two_dimensional_mask_in_a_loop():
    @nki.jit
    def neg(x):
        n, d = x.shape
        out = out_like(x.shape)
        i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
        for j in nl.affine_range((d + 63) // 64):
            rows = nl.program_id(0) * 128 + i_p
            cols = j * 64 + i_f
            m = (rows < n) & (cols < d)
            nl.store(out[rows, cols], value=nl.negative(nl.load(x[rows, cols], mask=m)), mask=m)
        return out

    z = rand(200, 150)
    np.testing.assert_array_equal(neg[2](z), -z)
