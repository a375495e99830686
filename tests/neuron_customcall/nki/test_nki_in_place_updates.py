"""Tiles updated in place (``t = f(t)`` in a loop body): the executor computes such a result into
the tile's own memory (``Runner.dst_view``) instead of a new array each iteration. These kernels
check the cases where working in place could go wrong: a caller's input bound without a copy,
an operand that is a view of the destination, overlapping source and destination ranges, and a
tile that another tile still views. Each against NumPy."""
from __future__ import annotations

import numpy as np
import pytest

from neuron_customcall import nki
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.isa import beta2 as nisa  # the SDK's `nki.isa` (beta 2)


def _sb(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)


@nki.jit
def scale_rows_dynamic(x, count):
    """Half the rows doubled ``count`` times in a register-bounded loop, the tile loaded whole
    from the input (bound to the caller's array without a copy)."""
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    t = _sb(x.shape)
    nisa.dma_copy(dst=t, src=x)
    c = _sb((1, 1), nl.int32)
    nisa.dma_copy(dst=c, src=count)
    hi = nisa.register_alloc()
    nisa.register_load(hi, c)
    for _ in nl.dynamic_range(hi):
        nisa.tensor_scalar(dst=t[0:64, :], data=t[0:64, :], op0=nl.multiply, operand0=2.0)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=0.5, op1=nl.add,
                           operand1=0.25)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_a_loop_updating_a_tile_loaded_from_an_input_never_changes_the_callers_array():
    x = np.random.default_rng(0).random((128, 256)).astype(np.float32)
    before = x.copy()
    got = scale_rows_dynamic(x, np.array([[3]], np.int32))
    want = before.copy()
    for _ in range(3):
        want[:64] *= np.float32(2)
        want = want * np.float32(0.5) + np.float32(0.25)
    np.testing.assert_array_equal(x, before)
    np.testing.assert_allclose(got, want, rtol=1e-6)


@nki.jit
def scale_by_own_column(x, n: int):
    """``t = (t * 1.5) - t[:, 0:1]``: operand1 is a per-partition view of the destination, so op0
    must not be computed into the destination before operand1 is read."""
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    t = _sb(x.shape)
    nisa.dma_copy(dst=t, src=x)
    for _ in nl.sequential_range(n):
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=1.5, op1=nl.subtract,
                           operand1=t[:, 0:1])
    nisa.dma_copy(dst=out, src=t)
    return out


def test_an_operand_that_views_the_destination_is_read_before_the_destination_changes():
    x = np.random.default_rng(1).random((128, 64)).astype(np.float32)
    want = x.copy()
    for _ in range(4):
        want = want * np.float32(1.5) - want[:, 0:1]
    np.testing.assert_allclose(scale_by_own_column(x, 4), want, rtol=1e-6)


@nki.jit
def shift_add(x, n: int):
    """``t[:, 1:] = t[:, :-1] + t[:, 1:]``, sources and destination overlapping at an offset."""
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    t = _sb(x.shape)
    nisa.dma_copy(dst=t, src=x)
    w = x.shape[1]
    for _ in nl.sequential_range(n):
        nisa.tensor_tensor(dst=t[:, 1:w], data1=t[:, 0:w - 1], data2=t[:, 1:w], op=nl.add)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_overlapping_source_and_destination_read_every_element_before_the_write():
    x = np.random.default_rng(2).random((128, 32)).astype(np.float32)
    want = x.copy()
    for _ in range(3):
        want[:, 1:] = want[:, :-1] + want[:, 1:]  # NumPy reads both operands first, as NKI does
    np.testing.assert_allclose(shift_add(x, 3), want, rtol=1e-6)


@nki.jit
def keep_then_update(x, n: int):
    """A snapshot of ``t`` taken before the loop must keep its values while ``t`` changes."""
    out = nl.ndarray((2,) + tuple(x.shape), nl.float32, buffer=nl.shared_hbm)
    t = _sb(x.shape)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
    snap = _sb(x.shape)
    nisa.tensor_copy(dst=snap, src=t)
    for _ in nl.sequential_range(n):
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=3.0)
    nisa.dma_copy(dst=out[0], src=snap)
    nisa.dma_copy(dst=out[1], src=t)
    return out


@pytest.mark.parametrize("n", [1, 3])
def test_a_copy_taken_before_the_updates_keeps_its_values(n):
    x = np.random.default_rng(3).random((128, 16)).astype(np.float32)
    got = keep_then_update(x, n)
    np.testing.assert_allclose(got[0], x + 1, rtol=1e-6)
    np.testing.assert_allclose(got[1], (x + 1) * np.float32(3.0) ** n, rtol=1e-6)


def test_a_python_loop_keeps_one_access_plan_per_access_not_per_iteration():
    """Plans were memoised by every Python-loop value, so a loop body reading a whole tile made
    a new plan (and a cache entry) per iteration: 40,002 after 20,000 iterations, without bound
    for a while loop. Now a plan is keyed by the loop values its access depends on."""
    x = np.random.default_rng(4).random((128, 8)).astype(np.float32)
    sizes = []
    for n in (10, 200):
        scale_by_own_column(x, n)
        traced = list(scale_by_own_column._cache.values())[-1]  # this n's trace
        sizes.append(len(traced.program.plans))
    assert sizes[0] == sizes[1] < 10, sizes
