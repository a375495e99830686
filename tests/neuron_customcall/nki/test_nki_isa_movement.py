"""Data movement and generation in ``nki.isa`` (AWS ISA reference), both generations against NumPy:
``dma_copy`` (HBM <-> SBUF, SBUF -> SBUF, HBM -> HBM, reshaping, beta 1's ``dst_rmw_op``),
``tensor_copy_predicated``, ``dma_transpose``, ``iota`` over access patterns that regroup the
tile's free axes, ``rng``/``rand2``/``dropout``; and the serialised round trip of the new
instructions."""
from __future__ import annotations

import numpy as np
import pytest

from emulator.kernel_ir import from_bytes, to_bytes
from emulator.kernel_exec import run_kernel
from neuron_customcall import nki
from neuron_customcall.nki import isa as nisa1
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import NkiValidationError
from neuron_customcall.nki.isa import beta2 as nisa

RNG = np.random.default_rng(7)


def _sb(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)


@nki.jit
def copies(x):
    """HBM -> SBUF (a [P, F] tile from a [P, 2, F/2] tensor: element counts match), SBUF -> SBUF
    converting to bfloat16, SBUF -> HBM, and HBM -> HBM."""
    out = nl.ndarray((128, 64), nl.bfloat16, buffer=nl.shared_hbm)
    out2 = nl.ndarray((128, 2, 32), nl.float32, buffer=nl.shared_hbm)
    t = _sb((128, 64))
    nisa.dma_copy(dst=t, src=x)
    b = _sb((128, 64), nl.bfloat16)
    nisa.dma_copy(dst=b, src=t)
    nisa.dma_copy(dst=out, src=b)
    nisa.dma_copy(dst=out2, src=x)
    return out, out2


@pytest.mark.parametrize("grid", [1, 2])
def test_dma_copy_between_every_pair_of_memories(grid):
    x = RNG.standard_normal((128, 2, 32)).astype(np.float32)
    out, out2 = copies[grid](x)
    np.testing.assert_array_equal(out.astype(np.float32),
                                  x.reshape(128, 64).astype(nl.bfloat16).astype(np.float32))
    np.testing.assert_array_equal(out2, x)


def test_dma_copy_beta1_rmw_and_size_rule():
    x = RNG.standard_normal((64, 16)).astype(np.float32)

    @nki.jit
    def k(x):
        out = nl.ndarray((64, 16), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        nisa1.dma_copy(dst=out, src=t)
        nisa1.dma_copy(dst=out, src=t, dst_rmw_op=nl.add)
        return out

    np.testing.assert_array_equal(k(x), 2 * x)

    @nki.jit
    def bad(x):
        t = _sb((64, 8))
        nisa.dma_copy(t, x)
        return x

    with pytest.raises(NkiValidationError, match="different numbers of elements"):
        bad(x)


def test_tensor_copy_predicated_keeps_dst_where_false():
    x = RNG.standard_normal((32, 24)).astype(np.float32)
    p = RNG.integers(0, 2, (32, 24)).astype(np.uint8)

    @nki.jit
    def k(x, p):
        out = nl.ndarray((3, 32, 24), nl.float32, buffer=nl.shared_hbm)
        t, pr = nl.load(x), nl.load(p)
        a, b, c = _sb((32, 24)), _sb((32, 24)), _sb((32, 24))
        for d in (a, b, c):
            nisa.memset(d, -1.0)
        nisa.tensor_copy_predicated(a, t, pr)
        nisa.tensor_copy_predicated(b, 9.0, pr, reverse_pred=True)
        nisa1.tensor_copy_predicated(src=t, dst=c, predicate=pr)
        for j, d in enumerate((a, b, c)):
            nl.store(out[j], d)
        return out

    got = k(x, p)
    np.testing.assert_array_equal(got[0], np.where(p != 0, x, -1.0))
    np.testing.assert_array_equal(got[1], np.where(p == 0, 9.0, -1.0))
    np.testing.assert_array_equal(got[2], got[0])


def test_tensor_copy_predicated_refuses_a_float_predicate():
    @nki.jit
    def k(x):
        t = nl.load(x)
        d = _sb((8, 8))
        nisa.tensor_copy_predicated(d, t, t)
        return x

    with pytest.raises(NkiValidationError, match="predicate must be an integer tile"):
        k(np.zeros((8, 8), np.float32))


@pytest.mark.parametrize("shape, axes", [((256, 64), None), ((4, 8, 16), (2, 0, 1))])
def test_dma_transpose_reads_through_a_permuted_view(shape, axes):
    x = RNG.standard_normal(shape).astype(np.float32)
    perm = tuple(reversed(range(len(shape)))) if axes is None else axes
    out_shape = tuple(shape[a] for a in perm)

    @nki.jit
    def k(x):
        out = nl.ndarray(out_shape, nl.float32, buffer=nl.shared_hbm)
        d = _sb(out_shape)
        nisa.dma_transpose(d, x, axes=axes)
        nisa.dma_copy(out, d)
        b1 = nl.ndarray(out_shape, nl.float32, buffer=nl.shared_hbm)
        nl.store(b1, nisa1.dma_transpose(x, axes=axes))
        return out, b1

    out, b1 = k(x)
    np.testing.assert_array_equal(out, np.transpose(x, perm))
    np.testing.assert_array_equal(b1, np.transpose(x, perm))


def test_iota_pattern_regrouping_the_free_axis():
    """A [2, 3] x [1, 4] pattern over a [16, 12] tile: the values of a [16, 3, 4] iota laid out
    row-major along the one free axis (as the reference's loop nest writes them)."""
    @nki.jit
    def k():
        out = nl.ndarray((16, 12), nl.int32, buffer=nl.shared_hbm)
        d = _sb((16, 12), nl.int32)
        nisa.iota(d, [[10, 3], [1, 4]], offset=-5, channel_multiplier=2)
        nisa.dma_copy(out, d)
        return out

    p = np.arange(16)[:, None, None]
    want = -5 + 2 * p + 10 * np.arange(3)[None, :, None] + np.arange(4)[None, None, :]
    np.testing.assert_array_equal(k(), want.reshape(16, 12))


def test_iota_pattern_size_must_match():
    @nki.jit
    def k():
        d = _sb((16, 12), nl.int32)
        nisa.iota(d, [[1, 5]])
        return None

    with pytest.raises(NkiValidationError, match="pattern covers 5 elements"):
        k()


def test_rng_rand2_and_dropout():
    x = RNG.standard_normal((128, 256)).astype(np.float32)

    @nki.jit
    def k(x):
        bits = nl.ndarray((128, 256), nl.uint16, buffer=nl.shared_hbm)
        uni = nl.ndarray((128, 256), nl.float32, buffer=nl.shared_hbm)
        drop = nl.ndarray((2, 128, 256), nl.float32, buffer=nl.shared_hbm)
        b, u = _sb((128, 256), nl.uint16), _sb((128, 256))
        nisa.rng(b)
        nisa.rand2(u, -2.0, 3.0)
        t = nl.load(x)
        d, prob = _sb((128, 256)), _sb((128, 1))
        nisa.memset(prob, 0.25)
        nisa.dropout(d, t, prob)
        nisa.dma_copy(bits, b)
        nisa.dma_copy(uni, u)
        nisa.dma_copy(drop[0], d)
        nl.store(drop[1], nisa1.dropout(t, 1.0))
        return bits, uni, drop

    bits, uni, drop = k(x)
    assert bits.dtype == np.uint16 and len(np.unique(bits)) > 20000
    assert abs(bits.astype(np.float64).mean() / 65535 - 0.5) < 0.01
    assert uni.min() >= -2.0 and uni.max() < 3.0 and abs(uni.mean() - 0.5) < 0.02
    kept = drop[0] != 0
    np.testing.assert_array_equal(drop[0][kept], x[kept])
    assert abs(kept.mean() - 0.75) < 0.01
    np.testing.assert_array_equal(drop[1], 0.0)


def test_rng_refuses_a_float_destination():
    @nki.jit
    def k():
        nisa.rng(_sb((8, 8)))
        return None

    with pytest.raises(NkiValidationError, match="rng dtype"):
        k()


def test_new_instructions_survive_serialisation():
    x = RNG.standard_normal((128, 2, 32)).astype(np.float32)
    traced = nki.trace_kernel(copies.func, [nki.TensorSpec(x.shape, "float32")])
    ir = from_bytes(to_bytes(traced.ir))
    assert "dma_copy" in {s.op for s in ir.body}
    out, out2 = run_kernel(ir, [x])
    np.testing.assert_array_equal(out2, x)


def test_set_rng_seed_makes_draws_functions_of_the_seed_value():
    @nki.jit
    def k(seeds):
        out = nl.ndarray((3, 16, 32), nl.uint32, buffer=nl.shared_hbm)
        for j in nl.static_range(3):
            s = _sb((1, 1), nl.int32)
            nisa.dma_copy(s, seeds[j:j + 1, :])
            nisa.set_rng_seed(s)
            b = _sb((16, 32), nl.uint32)
            nisa.rng(b)
            nisa.dma_copy(out[j], b)
        return out

    got = k(np.array([[7], [7], [8]], np.int32))
    np.testing.assert_array_equal(got[0], got[1])
    assert (got[0] != got[2]).mean() > 0.99


def test_dma_copy_through_indirect_and_bit_cast_views():
    """dma_copy of a tile-indexed HBM view gathers (or scatters, with beta 1's dst_rmw_op
    accumulating) as nl.load / nl.store / nl.atomic_rmw do; a bit-cast view is reinterpreted."""
    data = RNG.standard_normal((64, 16)).astype(np.float32)
    idx = RNG.permutation(64)[:32].astype(np.int32)

    @nki.jit
    def k(data, idx):
        gathered = nl.ndarray((32, 16), nl.float32, buffer=nl.shared_hbm)
        scattered = nl.ndarray((64, 16), nl.float32, buffer=nl.shared_hbm)
        bits = nl.ndarray((64, 16), nl.int32, buffer=nl.shared_hbm)
        ix = _sb((32, 1), nl.int32)
        nisa.dma_copy(ix, idx.reshape((32, 1)))
        t = _sb((32, 16))
        nisa.dma_copy(t, data[ix[:, 0], :])
        nisa.dma_copy(gathered, t)
        zero = _sb((64, 16))
        nisa.memset(zero, 0.0)
        nisa.dma_copy(scattered, zero)
        nisa.dma_copy(scattered[ix[:, 0], :], t)
        nisa1.dma_copy(dst=scattered[ix[:, 0], :], src=t, dst_rmw_op=nl.add)
        b = _sb((64, 16), nl.int32)
        nisa.dma_copy(b, data.view(nl.int32))
        nisa.dma_copy(bits, b)
        return gathered, scattered, bits

    gathered, scattered, bits = k(data, idx)
    np.testing.assert_array_equal(gathered, data[idx])
    want = np.zeros_like(data)
    want[idx] = 2 * data[idx]
    np.testing.assert_array_equal(scattered, want)
    np.testing.assert_array_equal(bits, data.view(np.int32))
