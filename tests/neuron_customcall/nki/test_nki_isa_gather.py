"""Data-dependent GpSimd/VectorE instructions of ``nki.isa`` against NumPy transcriptions of the
AWS ISA reference: ``nc_n_gather``, ``local_gather``, ``sequence_bounds``, ``nonzero_with_count``
(only partitions 0, 16, ..., 112), ``nc_stream_shuffle`` (per quadrant, 255 keeps dst)."""
from __future__ import annotations

import numpy as np
import pytest

from neuron_customcall import nki
from neuron_customcall.nki import isa as nisa1
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import NkiValidationError
from neuron_customcall.nki.isa import beta2 as nisa

RNG = np.random.default_rng(21)


def _sb(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)


@pytest.mark.parametrize("grid", [1, 2])
def test_nc_n_gather_per_partition(grid):
    data = RNG.standard_normal((128 * grid, 4, 8)).astype(np.float32)
    idx = RNG.integers(0, 32, (128 * grid, 2, 5)).astype(np.uint32)

    @nki.jit
    def k(data, idx):
        out = nl.ndarray((128 * grid, 2, 5), nl.float32, buffer=nl.shared_hbm)
        i = nl.program_id(0)
        d, ix, o = _sb((128, 4, 8)), _sb((128, 2, 5), nl.uint32), _sb((128, 2, 5))
        nisa.dma_copy(d, data[i * 128:(i + 1) * 128])
        nisa.dma_copy(ix, idx[i * 128:(i + 1) * 128])
        nisa.nc_n_gather(o, d, ix)
        nisa.dma_copy(out[i * 128:(i + 1) * 128], o)
        return out

    flat = data.reshape(data.shape[0], -1)
    want = np.take_along_axis(flat, idx.reshape(idx.shape[0], -1).astype(np.int64), 1)
    np.testing.assert_array_equal(k[grid](data, idx), want.reshape(idx.shape))


def test_nc_n_gather_past_the_row_reads_uninitialised_memory():
    @nki.jit
    def k(data, idx):
        o = _sb((8, 2))
        nisa.nc_n_gather(o, nl.load(data), nl.load(idx))
        out = nl.ndarray((8, 2), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(out, o)
        return out

    idx = np.tile(np.array([[1, 4]], np.uint32), (8, 1))
    got = k(np.arange(32, dtype=np.float32).reshape(8, 4), idx)
    np.testing.assert_array_equal(got[:, 0], np.arange(8) * 4 + 1)
    assert np.isnan(got[:, 1]).all()


def _local_gather_ref(src, index, ne, nv):
    p = src.shape[0]
    rows = src.reshape(p, -1)
    out = np.empty((p, nv, ne), src.dtype)
    for g in range(p // 16):
        ids = index[g * 16:(g + 1) * 16].flatten(order="F")[:nv].astype(np.int64)
        for j, start in enumerate(ids):
            out[g * 16:(g + 1) * 16, j] = rows[g * 16:(g + 1) * 16, start:start + ne]
    return out


@pytest.mark.parametrize("ne, nv", [(1, None), (4, 40)])
def test_local_gather_both_generations(ne, nv):
    src = RNG.standard_normal((64, 128, 4)).astype(np.float32)
    index = (RNG.integers(0, 128, (64, 4)) * ne).astype(np.uint16)
    valid = 64 if nv is None else nv

    @nki.jit
    def k(src, index):
        out = nl.ndarray((2, 64, valid * ne), nl.float32, buffer=nl.shared_hbm)
        s, ix = nl.load(src), nl.load(index)
        d = _sb((64, valid * ne))
        nisa.local_gather(d, s, ix, ne, nv)
        nisa.dma_copy(out[0], d)
        nl.store(out[1], nisa1.local_gather(s, ix, ne, nv))
        return out

    got = k(src, index)
    want = _local_gather_ref(src, index, ne, valid).reshape(64, -1)
    np.testing.assert_array_equal(got[0], want)
    np.testing.assert_array_equal(got[1], want)


def test_local_gather_rules():
    @nki.jit
    def k(src, index):
        nisa1.local_gather(nl.load(src), nl.load(index), 3)
        return src

    with pytest.raises(NkiValidationError, match="num_elem_per_idx is one of"):
        k(np.zeros((16, 8), np.float32), np.zeros((16, 2), np.uint16))


def _bounds_ref(row):
    n = len(row)
    lo, hi = np.empty(n), np.empty(n)
    for i in range(n):
        if row[i] == 0:
            lo[i], hi[i] = n, -1
            continue
        a = i
        while a > 0 and row[a - 1] == row[i]:
            a -= 1
        b = i
        while b + 1 < n and row[b + 1] == row[i]:
            b += 1
        lo[i], hi[i] = a, b + 1
    return np.stack([lo, hi])


def test_sequence_bounds():
    ids = np.array([[1, 1, 2, 2, 2, 0, 0, 3, 1, 1, 0, 4]], np.int32)
    ids = np.concatenate([ids, RNG.integers(0, 3, (3, 12)).astype(np.int32)])

    @nki.jit
    def k(ids):
        out = nl.ndarray((2, 4, 2, 12), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(ids)
        d = _sb((4, 2, 12))
        nisa.sequence_bounds(d, t)
        nisa.dma_copy(out[0], d)
        nl.store(out[1], nisa1.sequence_bounds(segment_ids=t, dtype=nl.float32))
        return out

    got = k(ids)
    want = np.stack([_bounds_ref(r) for r in ids])
    np.testing.assert_array_equal(got[0], want)
    np.testing.assert_array_equal(got[1], want)
    assert want[0].tolist() == [[0, 0, 2, 2, 2, 12, 12, 7, 8, 8, 12, 11],
                                [2, 2, 5, 5, 5, -1, -1, 8, 10, 10, -1, 12]]


def test_nonzero_with_count_on_the_cores_partitions_only():
    src = (RNG.uniform(size=(64, 8)) > 0.6).astype(np.float32) * RNG.standard_normal((64, 8))
    src = src.astype(np.float32)
    src[0] = [0, 1, 1, 0, 0, 1, 0, 0]

    @nki.jit
    def k(src):
        out = nl.ndarray((64, 9), nl.int32, buffer=nl.shared_hbm)
        t = nl.load(src)
        d = _sb((64, 9), nl.int32)
        nisa.memset(d, 7)
        nisa.nonzero_with_count(d, t, index_offset=16, padding_val=-1)
        nisa.dma_copy(out, d)
        return out

    got = k(src)
    assert got[0].tolist() == [17, 18, 21, -1, -1, -1, -1, -1, 3]
    for p in range(64):
        if p % 16:
            assert (got[p] == 7).all()
            continue
        nz = np.flatnonzero(src[p]) + 16
        want = np.concatenate([nz, np.full(8 - len(nz), -1), [len(nz)]])
        np.testing.assert_array_equal(got[p], want)


def test_nc_stream_shuffle_both_generations_and_in_place():
    x = RNG.standard_normal((64, 6)).astype(np.float32)
    mask = [(i + 3) % 32 for i in range(32)]
    mask[5] = 255

    @nki.jit
    def k(x):
        out = nl.ndarray((3, 64, 6), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        d = _sb((64, 6))
        nisa.memset(d, -1.0)
        nisa.nc_stream_shuffle(d, t, mask)
        nisa.dma_copy(out[0], d)
        e = _sb((64, 6))
        nisa.memset(e, -2.0)
        nisa1.nc_stream_shuffle(t, e, mask)
        nisa.dma_copy(out[1], e)
        nisa.nc_stream_shuffle(t, t, mask)
        nl.store(out[2], t)
        return out

    got = k(x)
    src = [q * 32 + (mask[i] if mask[i] != 255 else i) for q in range(2) for i in range(32)]
    want = x[src]
    keep = np.array([mask[i % 32] == 255 for i in range(64)])
    np.testing.assert_array_equal(got[0], np.where(keep[:, None], -1.0, want))
    np.testing.assert_array_equal(got[1], np.where(keep[:, None], -2.0, want))
    np.testing.assert_array_equal(got[2], np.where(keep[:, None], x, want))


def test_nc_stream_shuffle_mask_rule():
    @nki.jit
    def k(x):
        t = nl.load(x)
        nisa.nc_stream_shuffle(t, t, [0] * 31)
        return x

    with pytest.raises(NkiValidationError, match="shuffle_mask is 32"):
        k(np.zeros((32, 2), np.float32))


def test_nc_stream_shuffle_broadcasts_one_partition_to_a_quadrant():
    """src covering fewer partitions than dst: with shuffle_mask all 0, partition 0 of src
    reaches the 32 partitions of dst (the reference's broadcast example)."""
    x = RNG.standard_normal((1, 16)).astype(np.float32)

    @nki.jit
    def k(x):
        out = nl.ndarray((32, 16), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        d = _sb((32, 16))
        nisa1.nc_stream_shuffle(src=t, dst=d, shuffle_mask=[0] * 32)
        nl.store(out, d)
        return out

    np.testing.assert_array_equal(k(x), np.repeat(x, 32, axis=0))


def test_nc_stream_shuffle_into_a_fresh_tile_keeps_its_255_partitions():
    """dst allocated just before a shuffle that keeps some of its partitions (255): the
    instruction reads dst, so it does not take the allocation's place (was 'read before
    allocation'). A tile nothing wrote holds the uninitialised fill, NaN."""
    x = RNG.standard_normal((64, 8)).astype(np.float32)
    mask = [(i - 1) % 32 for i in range(32)]
    mask[7] = 255

    @nki.jit
    def k(x):
        out = nl.ndarray((64, 8), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        d = nl.ndarray((64, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa1.nc_stream_shuffle(src=t, dst=d, shuffle_mask=mask)
        nl.store(out, d)
        return out

    got = k(x)
    for p in range(64):
        if mask[p % 32] == 255:
            assert np.isnan(got[p]).all()
        else:
            np.testing.assert_array_equal(got[p], x[(p // 32) * 32 + mask[p % 32]])


def test_nc_stream_shuffle_refuses_a_partition_src_does_not_cover():
    @nki.jit
    def k(x):
        out = nl.ndarray((32, 4), nl.float32, buffer=nl.shared_hbm)
        d = _sb((32, 4))
        nisa1.nc_stream_shuffle(src=nl.load(x), dst=d, shuffle_mask=[1] * 32)
        nl.store(out, d)
        return out

    with pytest.raises(NkiValidationError, match="reads src partition 1.*src covers 1 partitions"):
        k(np.zeros((1, 4), np.float32))
