"""A partition-only tile ``[P]`` (a reduction without ``keepdims``) is ``[P, 1]`` to NKI: it
broadcasts along the free axes in every binary op, ``where``, assignment, store and ISA operand,
never as NumPy's trailing axis. Each site against NumPy; square tiles (P == free size) are
included because there NumPy's rule gives a plausible wrong answer instead of an error."""

from __future__ import annotations

import numpy as np
import pytest

from neuron_customcall import nki
from neuron_customcall.nki import isa as nisa
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import KernelTraceError

rng = np.random.default_rng(13)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("free", [128, 512, 64])
def test_row_max_without_keepdims_broadcasts_along_the_free_axis(free):
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        nl.store(out, value=x - nl.max(x, axis=1))
        return out

    a = rand(128, free)
    np.testing.assert_array_equal(k(a), a - a.max(axis=1, keepdims=True))


def test_attention_style_softmax_with_partition_only_statistics():
    """The issue's case: scores of [128, 128] (P == free size), the row max and row sum taken
    without keepdims; NumPy broadcasting made the result off by up to 1e9."""
    @nki.jit
    def attention(qT, kT, v):
        d, s = qT.shape
        out = nl.ndarray((s, v.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        q_t, k_t, v_t = nl.load(qT), nl.load(kT), nl.load(v)
        scores = nl.copy(nisa.nc_matmul(q_t, k_t))          # [s, s] = q @ k.T
        shifted = nl.subtract(scores, nl.max(scores, axis=1))  # [s, s] - [s]
        e = nl.exp(shifted)
        p = nl.divide(e, nl.sum(e, axis=1))                  # [s, s] / [s]
        pT = nl.copy(nl.transpose(p))
        nl.store(out, value=nl.copy(nisa.nc_matmul(pT, v_t)))
        return out

    q, kk, v = rand(128, 32), rand(128, 32), rand(128, 64)
    scores = q @ kk.T
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    want = (e / e.sum(axis=1, keepdims=True)) @ v
    np.testing.assert_allclose(attention(q.T.copy(), kk.T.copy(), v), want, rtol=1e-4, atol=1e-5)


def test_partition_only_tiles_with_each_other_and_with_p1_tiles():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        x = nl.load(a)
        s = nl.sum(x, axis=1)                       # [128]
        m = nl.max(x, axis=1, keepdims=True)        # [128, 1]
        both = nl.add(s, m)                         # [128] + [128, 1] -> [128, 1]
        nl.store(out, value=nl.multiply(both, s))   # [128, 1] * [128]
        return out

    a = rand(128, 128)
    s, m = a.sum(axis=1, keepdims=True), a.max(axis=1, keepdims=True)
    np.testing.assert_allclose(k(a), (s + m) * s, rtol=1e-5, atol=1e-5)


def test_where_with_partition_only_condition_and_values():
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        m = nl.max(x, axis=1)                       # [128]
        positive = nl.greater(m, 0.0)               # [128] bool
        nl.store(out, value=nl.where(positive, x, m))
        return out

    a = rand(128, 128)
    m = a.max(axis=1, keepdims=True)
    np.testing.assert_array_equal(k(a), np.where(m > 0, a, m))


def test_store_partition_only_tile_into_p1_and_p_views_and_broadcast_store():
    @nki.jit
    def k(a):
        col = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        vec = nl.ndarray((128,), dtype=nl.float32, buffer=nl.shared_hbm)
        wide = nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        x = nl.load(a)
        s = nl.sum(x, axis=1)                                  # [128]
        nl.store(col, value=s)                                 # [128] into [128, 1]
        nl.store(vec, value=nl.max(x, axis=1, keepdims=True))  # [128, 1] into [128]
        nl.store(wide, value=s)                                # [128] broadcast to [128, 16]
        return col, vec, wide

    a = rand(128, 128)
    col, vec, wide = k(a)
    np.testing.assert_allclose(col, a.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(vec, a.max(axis=1))
    np.testing.assert_allclose(wide, np.repeat(a.sum(axis=1, keepdims=True), 16, axis=1),
                               rtol=1e-5, atol=1e-5)


def test_assignment_and_in_place_accumulation_of_a_partition_only_tile():
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        t = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
        t[...] = nl.min(x, axis=1)          # [128] assigned to [128, 128]
        t += nl.max(x, axis=1)              # [128, 128] += [128]
        nl.store(out, value=t)
        return out

    a = rand(128, 128)
    want = np.broadcast_to(a.min(axis=1, keepdims=True) + a.max(axis=1, keepdims=True), a.shape)
    np.testing.assert_allclose(k(a), want, rtol=1e-6)


def test_isa_operands_tensor_scalar_and_activation_bias_scale():
    @nki.jit
    def k(a):
        o1 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        m = nl.max(x, axis=1)                               # [128]
        s = nl.sum(x, axis=1)
        nl.store(o1, value=nisa.tensor_scalar(x, nl.subtract, m, op1=nl.multiply, operand1=s))
        nl.store(o2, value=nisa.activation(nl.copy, x, bias=m, scale=s))
        return o1, o2

    a = rand(128, 128)
    m, s = a.max(axis=1, keepdims=True), a.sum(axis=1, keepdims=True)
    o1, o2 = k(a)
    np.testing.assert_allclose(o1, (a - m) * s, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(o2, a * s + m, rtol=1e-5, atol=1e-5)


def test_free_sized_vector_against_a_tile_is_a_shape_error_naming_the_rule():
    """A [64] tile is 64 partitions: NumPy would broadcast it along the rows of [128, 64]."""
    @nki.jit
    def k(a, b):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.add(nl.load(a), nl.load(b)))
        return out

    with pytest.raises(KernelTraceError, match="partition axis"):
        k(rand(128, 64), rand(64))


def test_store_of_a_wider_value_into_a_column_is_an_error():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a))
        return out

    with pytest.raises(KernelTraceError, match="assignment shape"):
        k(rand(128, 4))


def test_mask_used_as_data_broadcasts_its_index_expressions_as_numpy_does():
    """Index expressions keep NumPy's rule (the indexing guide's i_p / i_f grid), also when a
    predicate over a 1-D and a 2-D index becomes a bool tile."""
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(64)
        keep = (i_p < 100) & (i_f >= 8)             # [128, 1] and [64] -> [128, 64]
        x = nl.load(a)
        nl.store(out, value=nl.where(keep, x, nl.negative(x)))   # a bool tile, not a select
        return out

    a = rand(128, 64)
    ip, jf = np.arange(128)[:, None], np.arange(64)
    np.testing.assert_array_equal(k(a), np.where((ip < 100) & (jf >= 8), a, -a))


@pytest.mark.parametrize("which", ["tensor_scalar", "bias"])
def test_per_partition_operand_of_another_shape_is_refused(which):
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        wrong = nl.max(x, axis=1, keepdims=True)[0:64]        # [64, 1] for 128 partitions
        if which == "tensor_scalar":
            nl.store(out, value=nisa.tensor_scalar(x, nl.add, wrong))
        else:
            nl.store(out, value=nisa.activation(nl.exp, x, bias=wrong))
        return out

    with pytest.raises(KernelTraceError, match="must be a scalar or a per-partition vector"):
        k(rand(128, 32))


def test_partition_only_tile_in_reductions_transpose_and_matmul():
    """Operations that name free axes read a [P] tile as [P, 1] too."""
    @nki.jit
    def k(a, w):
        o1 = nl.ndarray((128,), dtype=nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((1, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        o3 = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        x = nl.load(a)
        m = nl.max(x, axis=1)                                   # [128]
        nl.store(o1, value=nl.mean(m, axis=1))                  # over its one free element
        nl.store(o2, value=nl.copy(nl.transpose(m)))            # [1, 128]
        nl.store(o3, value=nl.copy(nisa.nc_matmul(nl.load(w), m)))   # w.T @ m: [128, 1]
        return o1, o2, o3

    a, w = rand(128, 64), rand(128, 128)
    m = a.max(axis=1)
    o1, o2, o3 = k(a, w)
    np.testing.assert_array_equal(o1, m)
    np.testing.assert_array_equal(o2, m[None, :])
    np.testing.assert_allclose(o3, (w.T @ m)[:, None], rtol=1e-4, atol=1e-4)
