"""nl.full(..., lazy_initialization=) and load_transpose2d of sources taller than 128 rows,
against NumPy; a tile allocated before a loop and rewritten in every iteration."""

from __future__ import annotations

import numpy as np
import pytest

from neuron_customcall import nki
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import HardwareRuleError, KernelTraceError

rng = np.random.default_rng(7)


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("buffer", ["sbuf", "psum", "shared_hbm"])
def test_full_with_lazy_initialization_reads_the_fill_everywhere(lazy, buffer):
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        buf = getattr(nl, buffer)
        acc = nl.full((128, 64), 2.5, nl.float32, buffer=buf, lazy_initialization=lazy)
        z = nl.zeros((128, 64), nl.float32, lazy_initialization=lazy)
        if buffer == "shared_hbm":
            acc = nl.load(acc)
        for i in nl.sequential_range(3):
            z += nl.load(a)
        nl.store(out, value=nl.add(nl.copy(acc), z))
        return out

    a = rng.standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_allclose(k(a), 2.5 + 3 * a, rtol=1e-6)


def test_lazy_initialization_must_be_a_bool():
    @nki.jit
    def k(a):
        nl.full((128, 4), 1.0, nl.float32, lazy_initialization="yes")
        return a

    with pytest.raises(KernelTraceError, match="lazy_initialization must be True or False"):
        k(np.zeros((1, 1), np.float32))


@pytest.mark.parametrize("rows,cols", [(512, 128), (1000, 96), (128, 64), (64, 128)])
def test_load_transpose2d_of_tall_sources(rows, cols):
    @nki.jit
    def k(a):
        out = nl.ndarray((a.shape[1], a.shape[0]), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load_transpose2d(a))
        return out

    a = rng.standard_normal((rows, cols)).astype(np.float32)
    np.testing.assert_array_equal(k(a), a.T)


def test_load_transpose2d_of_a_view_with_a_source_mask_and_dtype():
    @nki.jit
    def k(a):
        out = nl.ndarray((64, 256), dtype=nl.float32, buffer=nl.shared_hbm)
        i_k = nl.arange(256)[:, None]
        i_m = nl.arange(64)[None, :]
        t = nl.load_transpose2d(a[i_k + 256, i_m + 32], mask=(i_k < 200), dtype=nl.float32)
        nl.store(out, value=nl.where(nl.arange(256)[None, :] < 200, t, 0.0))
        return out

    a = rng.standard_normal((512, 128)).astype(np.float16)
    want = a[256:512, 32:96].astype(np.float32).T.copy()
    want[:, 200:] = 0
    np.testing.assert_array_equal(k(a), want)


def test_load_transpose2d_result_wider_than_the_partitions_is_refused():
    @nki.jit
    def k(a):
        out = nl.ndarray((256, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load_transpose2d(a))
        return out

    with pytest.raises(HardwareRuleError, match="partition dimension 256"):
        k(np.zeros((64, 256), np.float32))


@pytest.mark.parametrize("generation", ["beta1", "beta2"])
@pytest.mark.parametrize("loop", ["affine_range", "sequential_range"])
def test_a_tile_allocated_before_a_loop_and_rewritten_in_each_iteration(generation, loop):
    """Regression: a tile declared outside an affine_range loop, written then read in every
    iteration, ran as a batch whose write kept only the last iteration's value, so every
    iteration but the last computed from the wrong data. Each iteration must see its own write
    (as running the iterations in order does)."""
    from neuron_customcall.nki.isa import beta2 as nisa

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 16), nl.float32, buffer=nl.sbuf)
        e = nl.ndarray((128, 16), nl.float32, buffer=nl.sbuf)
        for s in getattr(nl, loop)(4):
            if generation == "beta1":
                t[...] = nl.load(x[s])
                nl.store(out[s], nl.exp(t))
            else:
                nisa.dma_copy(dst=t, src=x[s])
                nisa.activation(dst=e, op=nl.exp, data=t)
                nisa.dma_copy(dst=out[s], src=e)
        return out

    x = rng.standard_normal((4, 128, 16)).astype(np.float32)
    np.testing.assert_allclose(k(x), np.exp(x), rtol=1e-6)
