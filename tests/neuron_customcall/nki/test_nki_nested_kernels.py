"""Calling one ``@nki.jit`` kernel from inside another: the callee is traced inline into the
caller's IR (same programs, same tensors); against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from neuron_customcall import nki
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import KernelTraceError

from tests.neuron_customcall.nki.row_kernels import tiled_add as add_kernel

rng = np.random.default_rng(6)


@nki.jit
def scale_tile(t, factor):
    """A kernel used as a helper on an SBUF tile."""
    return nl.multiply(t, factor)


@nki.jit
def fill_rows(dst, value):
    """A kernel that only writes its argument."""
    i = nl.program_id(0) * 128 + nl.arange(128)[:, None]
    j = nl.arange(dst.shape[1])[None, :]
    nl.store(dst[i, j], value=nl.full((128, dst.shape[1]), value, nl.float32))


def test_nested_kernels_share_the_callers_grid_tensors_and_tiles():
    @nki.jit
    def outer(a, b):
        s = add_kernel(a, b)                 # an HBM tensor of the caller's trace
        s2 = add_kernel[2](s, a)             # the caller's grid is allowed too
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i = nl.program_id(0) * 128 + nl.arange(128)[:, None]
        j = nl.arange(a.shape[1])[None, :]
        nl.store(out[i, j], value=scale_tile(nl.load(s2[i, j]), 0.5))
        return out

    a, b = (rng.standard_normal((256, 64)).astype(np.float32) for _ in range(2))
    np.testing.assert_allclose(outer[2](a, b), (a + b + a) * 0.5, rtol=1e-6)
    # the same kernels still launch on their own
    np.testing.assert_allclose(add_kernel[2](a, b), a + b, rtol=1e-6)


def test_nested_kernel_writing_its_argument():
    @nki.jit
    def outer(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        fill_rows(out, 3.0)
        return out

    np.testing.assert_array_equal(outer[2](np.zeros((256, 8), np.float32)),
                                  np.full((256, 8), 3.0, np.float32))


def test_nested_kernel_on_another_grid_or_with_wrong_arguments_is_refused():
    @nki.jit
    def other_grid(a, b):
        return add_kernel[4](a, b)

    @nki.jit
    def wrong_args(a):
        return add_kernel(a)

    a = np.zeros((256, 8), np.float32)
    with pytest.raises(KernelTraceError, match="nested kernel grid"):
        other_grid[2](a, a)
    with pytest.raises(KernelTraceError, match="wrong arguments"):
        wrong_args[2](a)
