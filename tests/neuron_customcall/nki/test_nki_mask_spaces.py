"""Masks as AWS's NKI examples write them: ``and`` between two comparisons (the conjunction, as
NKI's front end reads the kernel's source), and masks over the source of an instruction whose
result is smaller (``max8``, ``nc_find_index8``, ``nc_match_replace8``'s search). A mask that
fits neither the result nor the source is refused: read against the result's positions it
would silently change meaning. Each against NumPy."""
from __future__ import annotations

import numpy as np
import pytest

from neuron_customcall import nki
from neuron_customcall.nki import isa as nisa  # beta 1: instructions return tiles
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.boolops import both, either
from neuron_customcall.nki.errors import KernelTraceError


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).random(shape).astype(np.float32)


@nki.jit
def exp_masked_and(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ix, iy = nl.mgrid[0:128, 0:16]
    nl.store(out, value=nl.exp(nl.load(a), mask=(ix < 64 and iy < 8)))
    return out


@nki.jit
def exp_masked_amp(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ix, iy = nl.mgrid[0:128, 0:16]
    nl.store(out, value=nl.exp(nl.load(a), mask=(ix < 64) & (iy < 8)))
    return out


def test_python_and_of_two_masks_is_both_conditions_like_amp():
    a = _rand(128, 16)
    got, amp = exp_masked_and(a), exp_masked_amp(a)
    np.testing.assert_allclose(got[:64, :8], np.exp(a[:64, :8]), rtol=1e-6)
    assert np.isnan(got[64:]).all() and np.isnan(got[:, 8:]).all()  # never written
    np.testing.assert_array_equal(np.isnan(got), np.isnan(amp))


def test_python_or_of_masks_is_refused_by_name():
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        ix, iy = nl.mgrid[0:128, 0:16]
        nl.store(out, value=nl.exp(nl.load(a), mask=(ix < 64 or iy < 8)))
        return out

    with pytest.raises(KernelTraceError, match="'or' of two comparisons is not an affine"):
        k(_rand(128, 16))


def test_and_or_keep_pythons_meaning_for_everything_but_masks():
    calls = []

    def later(v):
        return lambda: calls.append(v) or v

    assert both(0, later(1)) == 0 and calls == []  # short-circuit: the rest never runs
    assert both(2, later(3), later(0), later(5)) == 0 and calls == [3, 0]
    assert either("", later(None), later("x"), later("y")) == "x"
    assert either([], later(0)) == 0


@nki.jit
def kernel_with_plain_and(a, flag: int):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    scale = 2.0 if (flag > 0 and a.shape[0] == 128) else 3.0
    nl.store(out, value=nl.multiply(t, scale))
    return out


@pytest.mark.parametrize("flag,want", [(1, 2.0), (0, 3.0)])
def test_plain_and_in_kernel_source_still_decides_python_values(flag, want):
    a = _rand(128, 4)
    np.testing.assert_allclose(kernel_with_plain_and(a, flag), a * want, rtol=1e-6)


@nki.jit
def top8_of_masked_source(a):
    """max8 over the first half of the free axis, on the first half of the partitions only."""
    n, m = a.shape
    out = nl.ndarray((n, 8), dtype=a.dtype, buffer=nl.shared_hbm)
    ix, iy = nl.mgrid[0:n, 0:m]
    t = nl.load(a)
    nl.store(out, value=nisa.max8(src=t[ix, iy], mask=(ix < n // 2 and iy < m // 2)))
    return out


def test_max8_mask_over_the_source_restricts_the_searched_elements():
    a = _rand(128, 64, seed=1)
    got = top8_of_masked_source(a)
    want = -np.sort(-a[:64, :32], axis=1)[:, :8]
    np.testing.assert_array_equal(got[:64], want)
    assert np.isnan(got[64:]).all()  # partitions the mask excludes are not written


@nki.jit
def find_and_replace_masked(a, vals):
    n, m = a.shape
    out = nl.ndarray((n, m), dtype=a.dtype, buffer=nl.shared_hbm)
    idx = nl.ndarray((n, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    ix, iy = nl.mgrid[0:n, 0:m]
    t = nl.load(a)
    v = nl.load(vals)
    nl.store(idx, value=nisa.nc_find_index8(data=t[ix, iy], vals=v, mask=(iy >= 8)))
    nl.store(out, value=nisa.nc_match_replace8(data=t[ix, iy], vals=v, imm=-1.0,
                                               mask=(iy >= 8)))
    return out, idx


def test_a_value_outside_the_mask_is_never_found_or_replaced():
    """Each searched value also occurs before the mask (columns 0-7): only the occurrence inside
    it counts, for the index and for the replacement."""
    n, m = 16, 32
    a = _rand(n, m, seed=2)
    a[:, :8] = a[:, 8:16]  # the same 8 values in front, outside the mask
    vals = np.ascontiguousarray(a[:, 8:16])
    out, idx = find_and_replace_masked(a, vals)
    np.testing.assert_array_equal(idx, np.tile(np.arange(8, 16, dtype=np.uint32), (n, 1)))
    want = a.copy()
    want[:, 8:16] = -1.0
    np.testing.assert_array_equal(out[:, 8:], want[:, 8:])
    assert np.isnan(out[:, :8]).all()


def test_a_mask_that_fits_neither_result_nor_source_is_refused():
    @nki.jit
    def k(a):
        n, m = a.shape
        out = nl.ndarray((n, 1), dtype=a.dtype, buffer=nl.shared_hbm)
        ix, iy = nl.mgrid[0:n, 0:m + 4]
        t = nl.load(a)
        nl.store(out, value=nisa.tensor_reduce(np.max, data=t, axis=[1], keepdims=True,
                                               mask=(iy < 8)))
        return out

    with pytest.raises(KernelTraceError, match=r"mask's index space \[128, 20\]"):
        k(_rand(128, 16))
