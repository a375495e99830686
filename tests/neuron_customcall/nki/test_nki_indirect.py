"""Tile-valued (indirect) indexing on loads and stores, as the indexing guide and the nl.load /
nl.store references describe: ``nl.load(a[idx_tile, i_f])`` gathers the rows an integer tile
names, ``nl.store(a[idx_tile, i_f], value=...)`` scatters to them; against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from neuron_customcall import nki
from neuron_customcall.nki import isa as nisa
from neuron_customcall.nki import language as nl
from emulator.kernel_exec.errors import KernelRuntimeError
from neuron_customcall.nki.errors import KernelTraceError

rng = np.random.default_rng(4)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_gather_rows_named_by_a_loaded_index_tile():
    @nki.jit
    def k(data, idx):
        out = nl.ndarray((64, 512), dtype=data.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(64)[:, None]
        i_f = nl.arange(512)[None, :]
        idx_tile = nl.load(idx[i_p])                  # [64, 1] in SBUF
        nl.store(out, value=nl.load(data[idx_tile[i_p, 0], i_f]))
        return out

    data = rand(128, 512)
    idx = rng.permutation(128)[:64].astype(np.int32)
    np.testing.assert_array_equal(k(data, idx), data[idx])


def test_gather_with_an_iota_index_tile_and_a_slice():
    @nki.jit
    def k(data):
        out = nl.ndarray((64, 512), dtype=data.dtype, buffer=nl.shared_hbm)
        idx_tile = nisa.iota(2 * nl.arange(64)[:, None], dtype=nl.int32)
        nl.store(out, value=nl.load(data[idx_tile, :]))
        return out

    data = rand(128, 512)
    np.testing.assert_array_equal(k(data), data[0:128:2])


def test_scatter_rows_and_indirect_atomic_accumulate():
    @nki.jit
    def k(src, idx):
        out = nl.ndarray((128, 32), dtype=src.dtype, buffer=nl.shared_hbm)
        acc = nl.ndarray((16, 32), dtype=src.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(64)[:, None]
        i_f = nl.arange(32)[None, :]
        nl.store(out, value=nl.zeros((128, 32), nl.float32))
        nl.store(acc, value=nl.zeros((16, 32), nl.float32))
        rows = nl.load(idx[i_p])
        t = nl.load(src)
        nl.store(out[rows, i_f], value=t)
        small = nl.load(idx[i_p])
        nl.atomic_rmw(acc[nl.bitwise_and(small, 15), i_f], value=t, op=nl.add)
        return out, acc

    src = rand(64, 32)
    idx = rng.permutation(128)[:64].astype(np.int32)
    out, acc = k(src, idx)
    want = np.zeros((128, 32), np.float32)
    want[idx] = src
    np.testing.assert_array_equal(out, want)
    want_acc = np.zeros((16, 32), np.float32)
    np.add.at(want_acc, idx & 15, src)
    np.testing.assert_allclose(acc, want_acc, rtol=1e-5, atol=1e-5)


def test_indirect_loads_across_a_grid_and_a_loop():
    """Every program gathers its own rows; the loop runs vectorised or not, same answer."""
    @nki.jit
    def k(data, idx):
        out = nl.ndarray((4, 32, 16), dtype=data.dtype, buffer=nl.shared_hbm)
        p = nl.program_id(0)
        i_p = nl.arange(32)[:, None]
        i_f = nl.arange(16)[None, :]
        for j in nl.affine_range(2):
            rows = nl.load(idx[p, j * 32 + i_p])                     # [32, 1]
            half = nl.load(data[rows, j * 16 + i_f])                 # [32, 16]
            nl.store(out[2 * p + j, i_p, i_f], value=half)
        return out

    data = rand(256, 32)
    idx = rng.integers(0, 256, size=(2, 64)).astype(np.int32)
    got = k[2](data, idx)
    for p in range(2):
        for j in range(2):
            np.testing.assert_array_equal(got[2 * p + j],
                                          data[idx[p, j * 32:(j + 1) * 32], j * 16:(j + 1) * 16])


def test_repeated_scatter_targets_keep_the_last_value():
    @nki.jit
    def k(src, idx):
        out = nl.ndarray((8, 4), dtype=src.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.zeros((8, 4), nl.float32))
        i_p = nl.arange(16)[:, None]
        nl.store(out[nl.load(idx[i_p]), nl.arange(4)[None, :]], value=nl.load(src))
        return out

    src = rand(16, 4)
    idx = (np.arange(16) % 8).astype(np.int32)
    want = np.zeros((8, 4), np.float32)
    for r in range(16):
        want[idx[r]] = src[r]
    np.testing.assert_array_equal(k(src, idx), want)


def test_an_index_outside_the_tensor_is_a_runtime_error_naming_it():
    @nki.jit
    def k(data, idx):
        out = nl.ndarray((4, 8), dtype=data.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(data[nl.load(idx[nl.arange(4)[:, None]]),
                                         nl.arange(8)[None, :]]))
        return out

    with pytest.raises(KernelRuntimeError, match=r"index 9 along dimension 0 \(extent 6\)"):
        k(rand(6, 8), np.array([0, 9, 1, 2], np.int32))


@pytest.mark.parametrize("case,rule", [
    ("float index", "indirect index dtype"),
    ("wide index", "indirect index on a free dimension"),
    ("free dim", "indirect index on a free dimension"),
    ("sbuf target", "indirect index of an on-chip tile"),
    ("other use", "indirect view"),
])
def test_indirect_misuse_is_a_trace_error(case, rule):
    @nki.jit
    def k(data, idx):
        out = nl.ndarray((4, 8), dtype=data.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.arange(4)[:, None], nl.arange(8)[None, :]
        rows = nl.load(idx[i_p])
        if case == "float index":
            v = nl.load(data[nl.copy(rows, dtype=nl.float32), i_f])
        elif case == "wide index":
            v = nl.load(data[nl.load(idx[i_p]).broadcast_to((4, 2)), i_f])
        elif case == "free dim":
            v = nl.load(data[i_p, rows])
        elif case == "sbuf target":
            v = nl.copy(nl.load(data)[rows, i_f])
        else:
            v = nl.load(data[rows, i_f][0:2])
        nl.store(out, value=v)
        return out

    with pytest.raises(KernelTraceError, match=rule):
        k(rand(4, 8), np.array([0, 1, 2, 3], np.int32))


def test_indirect_kernel_ir_survives_serialisation_and_runs_from_bytes():
    from emulator.kernel_exec import run_kernel
    from emulator.kernel_ir import from_bytes, to_bytes

    def k(data, idx):
        out = nl.ndarray((4, 8), dtype=data.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.arange(4)[:, None], nl.arange(8)[None, :]
        nl.store(out, value=nl.load(data[nl.load(idx[i_p]), i_f]))
        return out

    traced = nki.trace_kernel(k, [nki.TensorSpec((6, 8), "float32"),
                                  nki.TensorSpec((4,), "int32")], {}, (1,))
    ir = from_bytes(to_bytes(traced.ir))
    data, idx = rand(6, 8), np.array([5, 0, 3, 3], np.int32)
    np.testing.assert_array_equal(run_kernel(ir, [data, idx])[0], data[idx])


def test_indirect_index_on_a_block_dimension():
    """``a[idx_tile, i_p, i_f]``: partition p reads block idx[p] (a block dimension before the
    one the partitions walk)."""
    @nki.jit
    def k(data, idx):
        out = nl.ndarray((16, 8), dtype=data.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.arange(16)[:, None], nl.arange(8)[None, :]
        nl.store(out, value=nl.load(data[nl.load(idx[i_p]), i_p, i_f]))
        return out

    data = rand(5, 16, 8)
    idx = rng.integers(0, 5, size=16).astype(np.int32)
    np.testing.assert_array_equal(k(data, idx), data[idx, np.arange(16)])


@pytest.mark.parametrize("oob", ["error", "skip"])
def test_isa_dma_copy_indirect_gather_scatter_and_oob_skip(oob):
    """nisa.dma_copy with an index tile on the HBM side: a gather into SBUF, a scatter (and an
    accumulating scatter) into HBM; oob_mode.skip leaves rows whose index is outside alone."""
    step = 2 if oob == "error" else 3

    @nki.jit
    def k(a):
        g = nl.ndarray((64, 32), dtype=a.dtype, buffer=nl.shared_hbm)
        s = nl.ndarray((128, 32), dtype=a.dtype, buffer=nl.shared_hbm)
        ix, iy = nl.mgrid[0:64, 0:32]
        idx = nisa.iota(step * nl.arange(64)[:, None], dtype=nl.int32)
        mode = getattr(nisa.oob_mode, oob)
        got = nisa.memset(shape=(64, 32), value=-1.0, dtype=nl.float32)
        nisa.dma_copy(src=a[idx, iy], dst=got[ix, iy], oob_mode=mode)
        nl.store(g, value=got)
        nl.store(s, value=nl.full((128, 32), 1.0, nl.float32))
        nisa.dma_copy(dst=s[idx, iy], src=nl.load(a[0:64, :]), oob_mode=mode, dst_rmw_op=nl.add)
        return g, s

    a = rand(128, 32)
    rows = step * np.arange(64)
    inside = rows < 128
    want_g = np.full((64, 32), -1.0, np.float32)
    want_g[inside] = a[rows[inside]]
    want_s = np.ones((128, 32), np.float32)
    want_s[rows[inside]] += a[0:64][inside]
    g, s = k(a)
    np.testing.assert_array_equal(g, want_g)
    np.testing.assert_allclose(s, want_s, rtol=1e-6)
