"""Dimensions before ``nl.par_dim`` are block dimensions, not partitions:
``nl.ndarray((4, nl.par_dim(128), 512), buffer=nl.sbuf)`` is 4 tiles of [128, 512] (the beta-1
tutorials' layout). The partition limit, the SBUF/PSUM capacity and the PSUM tile rule see them
as such; against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from neuron_customcall import nki
from neuron_customcall.nki import isa as nisa
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import HardwareRuleError

rng = np.random.default_rng(5)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_sbuf_blocks_hold_separate_tiles_and_fit_the_capacity():
    """40 blocks of [128, 1024] fp32: 160 KiB per partition of the 192, refused before as 40
    partitions of 512 KiB each."""
    @nki.jit
    def k(a):
        nb = a.shape[0] // 128
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((nb, nl.par_dim(128), 1024), dtype=nl.float32, buffer=nl.sbuf)
        for b in nl.affine_range(nb):
            buf[b] = nl.load(a[b * 128:(b + 1) * 128, :])
        for b in nl.affine_range(nb):
            nl.store(out[b * 128:(b + 1) * 128, :], value=nl.multiply(buf[b], float(1)))
        return out

    a = rand(40 * 128, 1024)
    np.testing.assert_array_equal(k(a), a)


def test_block_tile_in_the_middle_and_zeros_like_keep_the_layout():
    @nki.jit
    def k(a):
        out = nl.ndarray((2, 3, 64, 16), dtype=a.dtype, buffer=nl.shared_hbm)
        buf = nl.zeros((2, 3, nl.par_dim(64), 16), dtype=nl.float32, buffer=nl.sbuf)
        acc = nl.zeros_like(buf)
        for i in nl.static_range(2):
            for j in nl.static_range(3):
                buf[i, j] = nl.load(a[i, j])
                acc[i, j, :, :] = nl.add(buf[i, j], buf[i, j])
                nl.store(out[i, j], value=acc[i, j])
        return out

    a = rand(2, 3, 64, 16)
    np.testing.assert_array_equal(k(a), 2 * a)


def test_psum_blocks_are_separate_banks():
    """Two PSUM blocks of [128, 512] fp32 (one bank each): legal, each block is one tile."""
    @nki.jit
    def k(lhsT, rhs):
        out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
        ps = nl.zeros((2, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
        x = nl.load(lhsT)
        for n in nl.affine_range(2):
            ps[n] += nisa.nc_matmul(x, nl.load(rhs[:, n * 512:(n + 1) * 512]))
            nl.store(out[:, n * 512:(n + 1) * 512], value=nl.copy(ps[n]))
        return out

    lhsT, rhs = rand(64, 128), rand(64, 1024)
    np.testing.assert_allclose(k(lhsT, rhs), lhsT.T @ rhs, rtol=1e-4, atol=1e-4)


def test_psum_blocks_larger_than_a_partition_are_refused():
    @nki.jit
    def k(a):
        ps = nl.zeros((2, nl.par_dim(128), 4096), dtype=nl.float32, buffer=nl.psum)
        return a

    with pytest.raises(HardwareRuleError, match="PSUM tile size limit"):
        k(rand(128, 4))


def test_psum_blocks_take_whole_banks_in_the_capacity():
    """Three blocks of 600 fp32 (2400 bytes: two banks each) and three of 512 (one each): 9
    banks live at once, one more than PSUM has, though their bytes (11.2 KiB) would fit."""
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        big = nl.zeros((3, nl.par_dim(128), 600), dtype=nl.float32, buffer=nl.psum)
        small = nl.zeros((3, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
        t = nl.load(a)
        for b in nl.affine_range(3):
            big[b, :, 0:4] += nisa.nc_matmul(t, t[:, 0:4])
            small[b, :, 0:4] += nisa.nc_matmul(t, t[:, 0:4])
        nl.store(out, value=nl.add(big[2, :, 0:4], nl.copy(small[2, :, 0:4])))
        return out

    with pytest.raises(HardwareRuleError, match="PSUM capacity"):
        k(rand(128, 128))


def test_blocks_beyond_the_sbuf_are_still_refused():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        buf = nl.ndarray((49, nl.par_dim(128), 1024), dtype=nl.float32, buffer=nl.sbuf)
        for b in nl.affine_range(49):
            buf[b] = nl.load(a)
        nl.store(out, value=nl.copy(buf[48, :, 0:4]))
        return out

    with pytest.raises(HardwareRuleError, match="SBUF capacity"):
        k(rand(128, 1024))
