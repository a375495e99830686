"""Copies at a dynamic offset (issue 13): beta 1's ``nisa.tensor_copy_dynamic_src/dst`` (an
on-chip view indexed by a one-element offset tile) and beta 2's ``.ap(scalar_offset=,
indirect_dim=)`` read and written by ``nisa.tensor_copy`` / ``nisa.dma_copy``, each against
NumPy written from the references' examples; an offset outside the tensor is an
``OutOfBoundsAccessError`` naming the value (never a wrap or a clip), misuse a named trace
error."""
from __future__ import annotations

import numpy as np
import pytest

from neuron_customcall.nki import isa as nisa1  # the SDK's `neuronxcc.nki.isa` (beta 1)
from neuron_customcall.nki.isa import beta2 as nisa  # the SDK's `nki.isa` (beta 2)
from emulator.kernel_exec.errors import OutOfBoundsAccessError
from neuron_customcall import nki
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import KernelTraceError

RNG = np.random.default_rng(13)


@nki.jit
def gather_columns(src_tensor, offsets):
    """The reference's tensor_copy_dynamic_src example 1: [128, 1, 4] tiles of a [128, 512, 4]
    tensor at the offsets' columns, one copy per offset in an affine loop."""
    out_tensor = nl.ndarray([128, offsets.shape[1], 4], dtype=src_tensor.dtype,
                            buffer=nl.shared_hbm)
    src_sbuf = nl.load(src_tensor)
    offsets_sbuf = nl.load(offsets)
    out_sbuf = nl.ndarray([128, offsets.shape[1], 4], dtype=src_tensor.dtype, buffer=nl.sbuf)
    ix, _, iz = nl.mgrid[0:128, 0:1, 0:4]
    for idx in nl.affine_range(offsets.shape[1]):
        out_sbuf[ix, idx, iz] = nisa1.tensor_copy_dynamic_src(src_sbuf[ix, offsets_sbuf[0, idx], iz])
    nl.store(out_tensor, value=out_sbuf)
    return out_tensor


@pytest.mark.parametrize("first", [0, 4, 504])
def test_tensor_copy_dynamic_src_gathers_at_the_offsets(first):
    src = RNG.random((128, 512, 4)).astype(np.float32) * 100
    idx = (first + np.arange(8, dtype=np.int32))[None, :]
    np.testing.assert_array_equal(gather_columns(src, idx), np.take(src, idx[0], axis=1))
    shuffled = RNG.permutation(512)[:8].astype(np.int32)[None, :]
    np.testing.assert_array_equal(gather_columns(src, shuffled), np.take(src, shuffled[0], axis=1))


@pytest.mark.parametrize("bad", [512, 600, -1])
def test_an_offset_outside_the_tile_is_an_error_naming_it(bad):
    src = RNG.random((128, 512, 4)).astype(np.float32)
    idx = np.arange(8, dtype=np.int32)[None, :]
    idx[0, 5] = bad
    with pytest.raises(OutOfBoundsAccessError, match=rf"kernel 'gather_columns' at .*"
                       rf"test_nki_dynamic_offsets\.py:\d+.*index {bad} along dimension 1 "
                       r"\(extent 512\)"):
        gather_columns(src, idx)


@nki.jit
def scatter_columns(src, offsets):
    """tensor_copy_dynamic_dst: column k of src goes to column offsets[0, k] of a zeroed tile."""
    out = nl.ndarray([128, 16], dtype=src.dtype, buffer=nl.shared_hbm)
    s = nl.load(src)
    o = nl.load(offsets)
    buf = nl.zeros([128, 16], dtype=src.dtype, buffer=nl.sbuf)
    for k in nl.affine_range(src.shape[1]):
        nisa1.tensor_copy_dynamic_dst(dst=buf[:, o[0, k]], src=s[:, k])
    nl.store(out, buf)
    return out


def test_tensor_copy_dynamic_dst_scatters_in_order():
    src = RNG.random((128, 5)).astype(np.float32)
    offs = np.array([[3, 9, 0, 15, 3]], np.int32)  # column 3 twice: the last copy lands
    want = np.zeros((128, 16), np.float32)
    for k, o in enumerate(offs[0]):
        want[:, o] = src[:, k]
    np.testing.assert_array_equal(scatter_columns(src, offs), want)
    with pytest.raises(OutOfBoundsAccessError, match=r"writes sbuf tensor .* index 16 along "
                       r"dimension 1 \(extent 16\)"):
        scatter_columns(src, np.array([[3, 9, 0, 16, 1]], np.int32))


@nki.jit
def add_two_by_row_blocks(inp):
    """The dynamic-loops guide's example: a dynamic_range over register bounds, each iteration
    reading and writing rows [i, i + 128) through .ap(scalar_offset=i)."""
    out = nl.ndarray(inp.shape, nl.float32, buffer=nl.shared_hbm)
    start = nisa.register_alloc(0)
    stop = nisa.register_alloc(inp.shape[0])
    for i in nl.dynamic_range(start, stop, 128):
        tile = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        result = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(src=inp.ap([[512, 128], [1, 512]], scalar_offset=i), dst=tile)
        nisa.tensor_scalar(dst=result, data=tile, op0=nl.add, operand0=2.0)
        nisa.dma_copy(src=result, dst=out.ap([[512, 128], [1, 512]], scalar_offset=i))
    return out


def test_ap_scalar_offset_with_the_loop_register_reads_and_writes_hbm_rows():
    x = RNG.random((512, 512)).astype(np.float32)
    np.testing.assert_array_equal(add_two_by_row_blocks(x), x + 2)
    with pytest.raises(OutOfBoundsAccessError, match=r"kernel 'past_the_end'.*indirect load reads "
                       r"hbm tensor 'inp' \[512, 512\] out of bounds: index 512, 513, .* along "
                       r"dimension 0 \(extent 512\)"):
        past_the_end(RNG.random((512, 512)).astype(np.float32))


@nki.jit
def past_the_end(inp):
    """Rows [400, 528) of a 512-row tensor: an error, not a wrap or a clip."""
    out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
    off = nisa.register_alloc(400)
    tile = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(src=inp.ap([[512, 128], [1, 512]], scalar_offset=off), dst=tile)
    nisa.dma_copy(dst=out, src=tile)
    return out


@nki.jit
def batch_at(a, which):
    """The access-pattern guide's scalar_dynamic_dma: A[w*128:(w+1)*128, 0:256] with w*128 in
    SBUF as a [1, 1] tile (not a register)."""
    result = nl.ndarray((128, 256), a.dtype, buffer=nl.shared_hbm)
    batch_idx = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.memset(batch_idx, value=which * 128)
    nisa.dma_copy(src=a.ap(pattern=[[512, 128], [1, 256]], offset=0, scalar_offset=batch_idx,
                           indirect_dim=0), dst=result[...])
    return result


@pytest.mark.parametrize("which", [0, 3])
def test_ap_scalar_offset_from_a_tile(which):
    a = RNG.random((512, 512)).astype(np.float32)
    np.testing.assert_array_equal(batch_at(a, which), a[which * 128:(which + 1) * 128, :256])


@nki.jit
def copy_prefix(data, n):
    """The fori_loop reference example: out[0, i] = data[0, i] for i < n, through a [1, 1]
    tile, both sides addressed by the loop's register on dimension 1; the rest stays 0."""
    out = nl.ndarray(data.shape, nl.float32, buffer=nl.shared_hbm)
    ub_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=ub_sb, src=n)
    ub_reg = nisa.register_alloc()
    nisa.register_load(ub_reg, ub_sb)
    zeros = nl.zeros(data.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=out, src=zeros)
    temp = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)

    def body(i):
        nisa.dma_copy(dst=temp, src=data.ap([[1, 1], [1, 1]], scalar_offset=i, indirect_dim=1))
        nisa.dma_copy(dst=out.ap([[1, 1], [1, 1]], scalar_offset=i, indirect_dim=1), src=temp)

    nl.fori_loop(0, ub_reg, body)
    return out


@pytest.mark.parametrize("n", [0, 5, 32])
def test_fori_loop_reference_example(n):
    data = RNG.random((1, 32)).astype(np.float32)
    want = np.zeros_like(data)
    want[0, :n] = data[0, :n]
    np.testing.assert_array_equal(copy_prefix(data, np.array([[n]], np.int32)), want)


@nki.jit
def sbuf_window(x, off):
    """beta 2 tensor_copy of an SBUF view at a register offset along the free dimension."""
    out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    o = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=o, src=off)
    reg = nisa.register_alloc()
    nisa.register_load(reg, o)
    w = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=w, src=t.ap([[64, 128], [1, 8]], scalar_offset=reg, indirect_dim=1))
    nisa.dma_copy(dst=out, src=w)
    return out


@pytest.mark.parametrize("start", [0, 17, 56])
def test_tensor_copy_of_an_sbuf_view_at_a_register_offset(start):
    x = RNG.random((128, 64)).astype(np.float32)
    np.testing.assert_array_equal(sbuf_window(x, np.array([[start]], np.int32)),
                                  x[:, start:start + 8])
    with pytest.raises(OutOfBoundsAccessError, match="index 64 along dimension 1"):
        sbuf_window(x, np.array([[57]], np.int32))  # 57 + 7 = 64: no wrap into the next row


def test_misuse_is_a_named_trace_error():
    @nki.jit
    def other_use(x):
        t = nl.load(x)
        o = nl.zeros((1, 1), nl.int32, buffer=nl.sbuf)
        return nl.store(x, nl.exp(t[:, o[0, 0]]))

    with pytest.raises(KernelTraceError, match="indirect view"):
        other_use(np.zeros((128, 4), np.float32))

    @nki.jit
    def float_offset(x):
        t = nl.load(x)
        o = nl.zeros((1, 1), nl.float32, buffer=nl.sbuf)
        w = nl.ndarray((128, 2), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=w, src=t.ap([[4, 128], [1, 2]], scalar_offset=o, indirect_dim=1))
        return x

    with pytest.raises(KernelTraceError, match="dynamic offset dtype"):
        float_offset(np.zeros((128, 4), np.float32))

    @nki.jit
    def many_offsets(x):
        t = nl.load(x)
        o = nl.zeros((128, 1), nl.int32, buffer=nl.sbuf)
        return nisa1.tensor_copy_dynamic_src(t[:, o])

    with pytest.raises(KernelTraceError, match="except by one value"):
        many_offsets(np.zeros((128, 4), np.float32))

    @nki.jit
    def static_src(x):
        return nisa1.tensor_copy_dynamic_src(nl.load(x))

    with pytest.raises(KernelTraceError, match="src must be indexed by a one-element offset"):
        static_src(np.zeros((128, 4), np.float32))


@nki.jit
def rows_by_vector_offset(a, how):
    """The access-pattern guide's vector dynamic access: partition p reads row 2p."""
    offsets = nl.ndarray((64, 1), nl.int32, nl.sbuf)
    nisa.iota(offsets, [[1, 1]], 0, 2)
    result_sb = nl.ndarray((64, 512), nl.float32, buffer=nl.sbuf)
    result = nl.ndarray((64, 512), nl.float32, buffer=nl.shared_hbm)
    src = (a.ap([[512, 64], [1, 512]], 0, vector_offset=offsets, indirect_dim=0)
           if how == "ap" else a.vector_select(0, offsets))
    nisa.dma_copy(src=src, dst=result_sb)
    nisa.dma_copy(dst=result, src=result_sb)
    return result


@pytest.mark.parametrize("how", ["ap", "vector_select"])
def test_vector_offsets_gather_rows(how):
    a = RNG.random((128, 512)).astype(np.float32)
    np.testing.assert_array_equal(rows_by_vector_offset(a, how), a[0:128:2])
    with pytest.raises(OutOfBoundsAccessError, match=r"index 100, 102, .* along dimension 0 \(extent 100\)"):
        rows_by_vector_offset(a[:100], how)


@nki.jit
def batch_by_select(a, which):
    """The guide's scalar dynamic select: a[which] of a (4, 128, 512) tensor, the index in SBUF
    (the dimension goes)."""
    batch_idx = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.memset(batch_idx, value=which)
    src = a.select(0, batch_idx)
    result = nl.ndarray(src.shape, a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(src=src, dst=result[...])
    return result


@pytest.mark.parametrize("which", [0, 3])
def test_select_at_a_run_time_index(which):
    a = RNG.random((4, 128, 512)).astype(np.float32)
    np.testing.assert_array_equal(batch_by_select(a, which), a[which])
    with pytest.raises(OutOfBoundsAccessError, match=r"index 4 along dimension 0 \(extent 4\)"):
        batch_by_select(a, 4)


def test_vector_offset_rules():
    @nki.jit
    def on_dim1(a):
        offsets = nl.ndarray((64, 1), nl.int32, nl.sbuf)
        r = nl.ndarray((64, 4), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(src=a.ap([[512, 64], [1, 4]], 0, vector_offset=offsets, indirect_dim=1),
                      dst=r)
        return a

    with pytest.raises(KernelTraceError, match=r"indexes dimension 0 of an HBM tensor"):
        on_dim1(np.zeros((128, 512), np.float32))


@nki.jit
def windows_at_computed_offsets(src, offsets, how):
    """A flash-attention style window copy, ``q_buf[i_d, i_s + tile_offsets[0, k]]``: the index
    is an index expression plus the offset tile, written in either order and shifted."""
    out = nl.ndarray([128, offsets.shape[1], 8], dtype=src.dtype, buffer=nl.shared_hbm)
    s = nl.load(src)
    o = nl.load(offsets)
    buf = nl.ndarray([128, offsets.shape[1], 8], dtype=src.dtype, buffer=nl.sbuf)
    ix, iy = nl.mgrid[0:128, 0:8]
    for k in nl.affine_range(offsets.shape[1]):
        if how == "expr_first":
            idx = iy + o[0, k]
        elif how == "offset_first":
            idx = o[0, k] + iy
        else:  # shifted by ints and index expressions after the offset is added
            idx = (iy + 3) + o[0, k] - 3
        buf[ix, k, iy] = nisa1.tensor_copy_dynamic_src(s[ix, idx])
    nl.store(out, buf)
    return out


@pytest.mark.parametrize("how", ["expr_first", "offset_first", "shifted"])
def test_tensor_copy_dynamic_src_at_an_index_computed_from_the_offset(how):
    src = RNG.random((128, 64)).astype(np.float32)
    offs = np.array([[0, 5, 17, 56, 31]], np.int32)  # 56 + 7 = 63: the last column
    want = np.stack([src[:, o:o + 8] for o in offs[0]], 1)
    np.testing.assert_array_equal(windows_at_computed_offsets(src, offs, how), want)


@pytest.mark.parametrize("bad", [57, -1])
def test_a_computed_index_outside_the_tile_is_an_error_at_run_time(bad):
    src = RNG.random((128, 64)).astype(np.float32)
    offs = np.array([[0, bad]], np.int32)
    where = 64 if bad > 0 else -1
    with pytest.raises(OutOfBoundsAccessError, match=rf"index {where} along dimension 1 "
                       r"\(extent 64\)"):
        windows_at_computed_offsets(src, offs, "expr_first")


@nki.jit
def scatter_windows(src, offsets):
    """tensor_copy_dynamic_dst into ``buf[:, iy + offsets[0, k]]``: window k of src lands at
    column offsets[0, k] of a zeroed tile (later windows overwrite earlier ones)."""
    out = nl.ndarray([128, 32], dtype=src.dtype, buffer=nl.shared_hbm)
    s = nl.load(src)
    o = nl.load(offsets)
    buf = nl.zeros([128, 32], dtype=src.dtype, buffer=nl.sbuf)
    ix, iy = nl.mgrid[0:128, 0:4]
    for k in nl.sequential_range(offsets.shape[1]):
        nisa1.tensor_copy_dynamic_dst(dst=buf[ix, iy + o[0, k]], src=s[ix, k * 4 + iy])
    nl.store(out, buf)
    return out


def test_tensor_copy_dynamic_dst_at_an_index_computed_from_the_offset():
    src = RNG.random((128, 12)).astype(np.float32)
    offs = np.array([[28, 2, 4]], np.int32)  # windows 1 and 2 overlap at column 4..5
    want = np.zeros((128, 32), np.float32)
    for k, o in enumerate(offs[0]):
        want[:, o:o + 4] = src[:, 4 * k:4 * k + 4]
    np.testing.assert_array_equal(scatter_windows(src, offs), want)


def test_an_index_plus_offset_used_as_data_is_the_tile_it_computes():
    """Outside a subscript ``iy + o[0, 0]`` is data (iota plus the offset), also after more
    arithmetic; in an HBM subscript its values index rows (indirect DMA)."""
    @nki.jit
    def k(x, offsets):
        out = nl.ndarray((3, 128, 8), nl.int32, buffer=nl.shared_hbm)
        rows = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
        o = nl.load(offsets)
        ix, iy = nl.mgrid[0:128, 0:8]
        nl.store(out[0], nl.add(nl.zeros((128, 8), nl.int32, buffer=nl.sbuf), iy + o[0, 0]))
        nl.store(out[1], nl.multiply(nl.zeros((128, 8), nl.int32, buffer=nl.sbuf) + 1,
                                     (o[0, 0] + iy) * 2))
        nl.store(out[2], nl.add(nl.zeros((128, 8), nl.int32, buffer=nl.sbuf), ix + o[0, 0] - 1))
        ip = nl.arange(128)[:, None]
        nl.store(rows, nl.load(x[ip + o[0, 0], iy]))
        return out, rows

    x = RNG.random((256, 8)).astype(np.float32)
    out, rows = k(x, np.array([[7]], np.int32))
    iy, ix = np.arange(8)[None, :], np.arange(128)[:, None]
    np.testing.assert_array_equal(out[0], np.broadcast_to(iy + 7, (128, 8)))
    np.testing.assert_array_equal(out[1], np.broadcast_to((iy + 7) * 2, (128, 8)))
    np.testing.assert_array_equal(out[2], np.broadcast_to(ix + 6, (128, 8)))
    np.testing.assert_array_equal(rows, x[7:135])


def test_nl_add_of_an_index_and_an_offset_keeps_the_tile_members():
    """nl.add(iy, o[0, 0]) is the tile iota + offset for every member a tile has."""
    @nki.jit
    def k(offsets):
        out = nl.ndarray((128, 2, 4), nl.int32, buffer=nl.shared_hbm)
        o = nl.load(offsets)
        iy = nl.arange(8)[None, :]
        t = nl.add(iy, o[0, 0])
        assert t.dtype == nl.int32
        zero = nl.zeros((128, 2, 4), nl.int32, buffer=nl.sbuf)
        nl.store(out, nl.add(zero, t.reshape((1, 2, 4))))
        return out

    got = k(np.array([[5]], np.int32))
    np.testing.assert_array_equal(got, np.broadcast_to((np.arange(8) + 5).reshape(1, 2, 4),
                                                       (128, 2, 4)))
