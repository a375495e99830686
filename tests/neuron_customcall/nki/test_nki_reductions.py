"""Reductions over any free axes (one, several, not only trailing ones; negative axes), with
and without keepdims, for every nl reduction and nisa.tensor_reduce, against NumPy; the
partition axis and malformed axes are trace errors naming the rule."""

from __future__ import annotations

import numpy as np
import pytest

from neuron_customcall import nki
from neuron_customcall.nki import isa as nisa
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import KernelTraceError

rng = np.random.default_rng(2)

#: nl function -> NumPy reference (var: population variance, as NKI's).
REDUCTIONS = {
    "sum": np.sum, "max": np.max, "min": np.min, "mean": np.mean, "prod": np.prod,
    "var": np.var, "all": np.all,
}

AXES = [1, 2, 3, -1, (1, 2), (2, 3), (1, 3), (1, 2, 3), [3, 1]]


def _reduce_kernel(name: str, axis, keepdims: bool):
    fn = getattr(nl, name)

    @nki.jit
    def k(a):
        x = nl.load(a)
        if name == "all":
            x = nl.greater(x, -1.5)
        r = fn(x, axis=axis, keepdims=keepdims)
        out = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=r)
        return out
    return k


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_language_reductions_over_free_axes(name, axis, keepdims):
    a = (rng.standard_normal((16, 3, 4, 5)) * (0.5 if name == "prod" else 1)).astype(np.float32)
    ref_in = a > -1.5 if name == "all" else a
    np_axis = tuple(axis) if isinstance(axis, list) else axis
    want = REDUCTIONS[name](ref_in, axis=np_axis, keepdims=keepdims)
    got = _reduce_kernel(name, axis, keepdims)(a)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [1, (1,), 2, (1, 2)], ids=str)
def test_isa_tensor_reduce_over_free_axes_with_negate(axis, keepdims):
    @nki.jit
    def k(a):
        r = nisa.tensor_reduce(nl.add, nl.load(a), axis, negate=True, keepdims=keepdims)
        out = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=r)
        return out

    a = rng.standard_normal((32, 6, 7)).astype(np.float32)
    np.testing.assert_allclose(k(a), -a.sum(axis=axis, keepdims=keepdims), rtol=1e-5, atol=1e-5)


def test_middle_axis_reduction_result_broadcasts_back():
    """keepdims of a middle axis gives [P, 1, B], which broadcasts against [P, A, B]."""
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        nl.store(out, value=nl.subtract(x, nl.mean(x, axis=1, keepdims=True)))
        return out

    a = rng.standard_normal((64, 8, 16)).astype(np.float32)
    np.testing.assert_allclose(k(a), a - a.mean(axis=1, keepdims=True), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("axis,rule", [
    (0, "reduction over the partition axis"),
    ((0, 1), "reduction over the partition axis"),
    (-3, "reduction over the partition axis"),
    (3, "out of range"),
    ((1, 1), "names an axis twice"),
    ((), "reduces nothing"),
    (1.0, "not an integer"),
])
def test_bad_reduction_axes_are_trace_errors(axis, rule):
    @nki.jit
    def k(a):
        r = nl.sum(nl.load(a), axis=axis)
        out = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=r)
        return out

    with pytest.raises(KernelTraceError, match=rule):
        k(rng.standard_normal((8, 4, 5)).astype(np.float32))


@pytest.mark.parametrize("keepdims", [False, True])
def test_masked_reductions_leave_out_masked_inputs_and_rows(keepdims):
    """A mask is over the input's positions: along the reduced axis masked elements do not
    contribute; rows it leaves out are not written (they keep the destination's value)."""
    @nki.jit
    def k(a):
        shape = (128, 1) if keepdims else (128,)
        o_sum = nl.ndarray(shape, dtype=nl.float32, buffer=nl.shared_hbm)
        o_max = nl.ndarray(shape, dtype=nl.float32, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(16)[None, :]
        x = nl.load(a)
        s = nl.full(shape, -1.0, nl.float32)
        s[...] = nl.sum(x, axis=1, mask=(i_f < 5) & (i_p < 100), keepdims=keepdims)
        m = nl.full(shape, -1.0, nl.float32)
        m[...] = nl.max(x, axis=1, mask=(i_f >= 8), keepdims=keepdims)
        nl.store(o_sum, value=s)
        nl.store(o_max, value=m)
        return o_sum, o_max

    a = rng.standard_normal((128, 16)).astype(np.float32)
    o_sum, o_max = k(a)
    want_sum = a[:, :5].sum(axis=1)
    np.testing.assert_allclose(o_sum.reshape(128)[:100], want_sum[:100], rtol=1e-5, atol=1e-5)
    assert np.isnan(o_sum.reshape(128)[100:]).all()   # unwritten rows of the result tile
    np.testing.assert_array_equal(o_max.reshape(128), a[:, 8:].max(axis=1))


def test_partition_mask_on_a_partition_only_tile():
    """An i_p of shape [P, 1] masks a [P] tile (NKI reads it as [P, 1])."""
    @nki.jit
    def k(a):
        out = nl.ndarray((128,), dtype=nl.float32, buffer=nl.shared_hbm)
        m = nl.max(nl.load(a), axis=1)
        r = nl.full((128,), 0.0, nl.float32)
        r[...] = nl.exp(m, mask=(nl.arange(128)[:, None] < 32))
        nl.store(out, value=r)
        return out

    a = rng.standard_normal((128, 8)).astype(np.float32)
    got = k(a)
    np.testing.assert_allclose(got[:32], np.exp(a.max(axis=1))[:32], rtol=1e-6)
    assert np.isnan(got[32:]).all()
