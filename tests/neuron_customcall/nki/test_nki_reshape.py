"""``reshape`` (and beta 2's ``reshape_dim`` / ``flatten_dims``) of tiles and HBM tensors that
merge or split dimensions: views, no data moved, against NumPy's row-major reshape."""

from __future__ import annotations

import numpy as np
import pytest

from neuron_customcall import nki
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import KernelTraceError

rng = np.random.default_rng(3)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("src,dst", [
    ((128, 4, 6), (128, 24)),          # merge two free dims
    ((128, 2, 3, 4), (128, 24)),       # merge three (a middle axis)
    ((128, 24), (128, 2, 12)),         # split
    ((128, 24), (128, 2, 3, 4)),       # split into three
    ((64, 4, 6), (64, 2, 2, 6)),       # split one, keep one
    ((64, 2, 3, 4), (64, 6, 4)),       # merge the first two, keep the last
    ((64, 4, 1, 6), (64, 24, 1)),      # size-1 dims come and go
    ((64, 24), (64, -1, 8)),           # -1 inferred
])
def test_sbuf_tile_reshape_merges_and_splits_free_dims(src, dst):
    want_shape = np.empty(src).reshape(dst).shape

    @nki.jit
    def k(a):
        out = nl.ndarray(want_shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        r = nl.multiply(t.reshape(dst), 2.0)      # read through the reshaped view
        nl.store(out, value=r)
        return out

    a = rand(*src)
    np.testing.assert_array_equal(k(a), (a * 2).reshape(dst))


def test_write_through_a_merged_view_and_reduce_it():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 6), dtype=a.dtype, buffer=nl.shared_hbm)
        s = nl.ndarray((128, 6, 4), dtype=nl.float32, buffer=nl.sbuf)
        s.reshape((128, 24))[...] = nl.load(a)     # write [128, 24] into a [128, 6, 4] tile
        nl.store(out, value=nl.sum(s, axis=2))
        return out

    a = rand(128, 24)
    np.testing.assert_allclose(k(a), a.reshape(128, 6, 4).sum(axis=2), rtol=1e-5, atol=1e-5)


def test_reshape_of_a_sliced_tile_and_reshape_dim_flatten_dims():
    @nki.jit
    def k(a):
        o1 = nl.ndarray((128, 12), dtype=a.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray((128, 6, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        o3 = nl.ndarray((128, 4, 2, 3, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)                                   # [128, 4, 6, 8]
        nl.store(o1, value=nl.copy(t[:, 1:3, 2, 0:6:1].reshape((128, 12))))
        nl.store(o2, value=nl.copy(t.flatten_dims(1, 2)[:, 3:9]))
        nl.store(o3, value=nl.copy(t.reshape_dim(2, (2, -1))))
        return o1, o2, o3

    a = rand(128, 4, 6, 8)
    o1, o2, o3 = k(a)
    np.testing.assert_array_equal(o1, a[:, 1:3, 2, 0:6].reshape(128, 12))
    np.testing.assert_array_equal(o2, a.reshape(128, 24, 8)[:, 3:9])
    np.testing.assert_array_equal(o3, a.reshape(128, 4, 2, 3, 8))


def test_merged_view_reshaped_back_and_split_differently():
    """A merged view reshaped again stays a view: back to its axes, or split another way."""
    @nki.jit
    def k(a):
        o1 = nl.ndarray((128, 4, 6), dtype=a.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray((128, 2, 12), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)                                    # [128, 4, 6]
        flat = t.reshape((128, 24))
        nl.store(o1, value=nl.copy(flat.reshape((128, 4, 6))))
        nl.store(o2, value=nl.copy(flat.reshape((128, 2, 12))))
        return o1, o2

    a = rand(128, 4, 6)
    o1, o2 = k(a)
    np.testing.assert_array_equal(o1, a)
    np.testing.assert_array_equal(o2, a.reshape(128, 2, 12))


def test_hbm_tensor_reshape_merges_leading_dims():
    """HBM tensors regroup any dimensions: a [4, 32, 64] input read as [128, 64] rows."""
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a.reshape((128, 64))))
        return out

    a = rand(4, 32, 64)
    np.testing.assert_array_equal(k(a), a.reshape(128, 64))


@pytest.mark.parametrize("src,dst,rule", [
    ((128, 24), (64, 48), "reshape of the partition dimension"),
    ((128, 6, 4), (128, 4, 6), "regrouped"),
    ((128, 24), (128, 5, 5), "elements"),
    ((128, 24), (128, -1, -1), "at most one"),
])
def test_bad_reshapes_are_trace_errors(src, dst, rule):
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        r = nl.load(a).reshape(dst)
        nl.store(out, value=nl.copy(r))
        return out

    with pytest.raises(KernelTraceError, match=rule):
        k(rand(*src))
