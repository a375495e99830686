"""``nc_matmul``'s arguments beyond the plain product (AWS ISA reference): tiling mode
(``tile_position``/``tile_size``: both or neither, sizes 32/64/128, positions multiples of the
sizes, the stationary fitting its tile; the values are the plain product), FP8 ``double_row``
mode (the contraction over the partition axis and a first free axis of 2), and the PSUM
destination rules of beta 2."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from neuron_customcall import nki
from neuron_customcall.nki import isa as nisa1
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import NkiValidationError
from neuron_customcall.nki.isa import beta2 as nisa

RNG = np.random.default_rng(11)


def _tiled(position, size):
    @nki.jit
    def k(a, b):
        out = nl.ndarray((a.shape[1], b.shape[1]), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa1.nc_matmul(nl.load(a), nl.load(b), tile_position=position,
                                      tile_size=size))
        return out
    return k


@pytest.mark.parametrize("position, size", [((64, 0), (64, 128)), ((32, 96), (32, 32)),
                                            ((0, 0), (128, 128))])
def test_tiling_mode_gives_the_product(position, size):
    k_, m = min(size[0], 32), min(size[1], 32)
    a = RNG.standard_normal((k_, m)).astype(np.float32)
    b = RNG.standard_normal((k_, 40)).astype(np.float32)
    np.testing.assert_allclose(_tiled(position, size)(a, b), a.T @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("position, size, rule", [
    ((0, 0), (), "both"), ((0, 0), (48, 128), "32, 64 or 128"),
    ((16, 0), (32, 128), "multiple of the row size"), ((0, 0), (32, 128), "does not fit")])
def test_tiling_mode_rules(position, size, rule):
    a = np.zeros((64, 16), np.float32)
    with pytest.raises(NkiValidationError, match=rule):
        _tiled(position, size)(a, a)


def test_double_row_fp8():
    a = RNG.standard_normal((128, 2, 16)).astype(ml_dtypes.float8_e4m3)
    b = RNG.standard_normal((128, 2, 24)).astype(ml_dtypes.float8_e5m2)

    @nki.jit
    def k(a, b):
        out = nl.ndarray((16, 24), nl.float32, buffer=nl.shared_hbm)
        st = nl.ndarray((128, 2, 16), nl.float8_e4m3, buffer=nl.sbuf)
        mv = nl.ndarray((128, 2, 24), nl.float8_e5m2, buffer=nl.sbuf)
        nisa.dma_copy(st, a)
        nisa.dma_copy(mv, b)
        acc = nl.ndarray((16, 24), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(acc, st, mv, perf_mode=nisa.matmul_perf_mode.double_row)
        r = nl.ndarray((16, 24), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(r, acc)
        nisa.dma_copy(out, r)
        return out

    af, bf = a.astype(np.float32), b.astype(np.float32)
    want = np.einsum("kjm,kjn->mn", af, bf)
    np.testing.assert_allclose(k(a, b), want, rtol=1e-5, atol=1e-4)


def test_double_row_needs_fp8():
    a = np.zeros((8, 2, 4), np.float32)

    @nki.jit
    def k(a):
        st = nl.load(a)
        acc = nl.ndarray((4, 4), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(acc, st, st, perf_mode=nisa.matmul_perf_mode.double_row)
        return a

    with pytest.raises(NkiValidationError, match="double_row multiplies float8"):
        k(a)


@pytest.mark.parametrize("buffer, dtype, rule", [(nl.sbuf, nl.float32, "writes its result to PSUM"),
                                                 (nl.psum, nl.float16, "the result is float32")])
def test_beta2_destination_rules(buffer, dtype, rule):
    a = np.zeros((8, 4), np.float32)

    @nki.jit
    def k(a):
        t = nl.load(a)
        d = nl.ndarray((4, 4), dtype, buffer=buffer)
        nisa.nc_matmul(d, t, t)
        return a

    with pytest.raises(NkiValidationError, match=rule):
        k(a)
