"""``NkiTensor.ap(pattern, offset)`` against NumPy transcriptions of NKI's access-pattern deep
dive: element ``[i0, i1, ...]`` of the view is ``t.flatten()[offset + sum(i_d * step_d)]``.
Patterns that map to per-dimension indices run; the partition-step rule of SBUF/PSUM tensors is
a hardware-rule error; what is not emulated is refused by name."""
from __future__ import annotations

import numpy as np
import pytest

from neuron_customcall import nki
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import HardwareRuleError, UnsupportedAPIError
from neuron_customcall.nki.isa import beta2 as nisa

RNG = np.random.default_rng(2026)


def _pattern_ref(a: np.ndarray, pattern, offset: int) -> np.ndarray:
    """The deep dive's loop, vectorised: flatten, then gather offset + sum(i_d * step_d)."""
    flat = a.reshape(-1)
    idx = np.full([n for _, n in pattern], offset)
    for d, (step, num) in enumerate(pattern):
        shape = [1] * len(pattern)
        shape[d] = num
        idx = idx + step * np.arange(num).reshape(shape)
    return flat[idx]


def test_pooling_windows_of_an_sbuf_tile():
    """A [C, H, W] tile seen as [C, H/2, W/2, 2, 2] windows, summed over the window axes."""
    c, h, w = 8, 6, 10
    x = RNG.standard_normal((c, h, w)).astype(np.float32)
    pattern = [[h * w, c], [2 * w, h // 2], [2, w // 2], [w, 2], [1, 2]]

    @nki.jit
    def k(x):
        out = nl.ndarray((c, h // 2, w // 2), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nl.store(out, nl.sum(t.ap(pattern), axis=[3, 4]))
        return out

    want = _pattern_ref(x, pattern, 0).sum(axis=(3, 4))
    np.testing.assert_allclose(k(x), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("pattern, offset", [
    ([[16, 16], [1, 8]], 8),              # the deep dive's t[0:16, 8:16]
    ([[16, 16], [2, 8]], 1),              # odd columns
    ([[16, 16], [0, 3], [1, 4]], 4),      # a repeated (step 0) axis
])
def test_sbuf_patterns_with_offsets(pattern, offset):
    x = RNG.standard_normal((16, 16)).astype(np.float32)
    shape = tuple(n for _, n in pattern)

    @nki.jit
    def k(x):
        out = nl.ndarray(shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(out, nl.copy(t.ap(pattern, offset=offset)))
        return out

    np.testing.assert_array_equal(k(x), _pattern_ref(x, pattern, offset))


def test_an_hbm_pattern_reads_every_other_row():
    x = RNG.standard_normal((64, 12)).astype(np.float32)
    pattern = [[24, 32], [1, 12]]

    @nki.jit
    def k(x):
        out = nl.ndarray((32, 12), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(x.ap(pattern, offset=12)))
        return out

    np.testing.assert_array_equal(k(x), x[1::2])


def test_a_view_keeps_its_offset_when_none_is_given():
    x = RNG.standard_normal((32, 16)).astype(np.float32)

    @nki.jit
    def k(x):
        out = nl.ndarray((32, 4), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(out, nl.copy(t[:, 6:10].ap([[16, 32], [1, 4]])))
        return out

    np.testing.assert_array_equal(k(x), x[:, 6:10])


@pytest.mark.parametrize("loop", ["affine_range", "sequential_range"])
def test_a_view_starting_at_a_loop_variable_keeps_that_start(loop):
    """Regression: ``b[i, s:s + 1, :].ap(...)`` inside a loop over ``s`` dropped the loop
    variable from the view's start, so every iteration read row 0 (a plausible wrong answer).
    Here a step-0 partition pattern broadcasts the row, as a DMA can."""
    b = RNG.standard_normal((2, 3, 16)).astype(np.float32)

    @nki.jit
    def k(b):
        out = nl.ndarray((2, 3, 128, 16), nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            for s in getattr(nl, loop)(3):
                t = nl.ndarray((128, 16), nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=t, src=b[i, s:s + 1, :].ap([[0, 128], [1, 16]]))
                nisa.dma_copy(dst=out[i, s], src=t)
        return out

    np.testing.assert_array_equal(k(b), np.broadcast_to(b[:, :, None, :], (2, 3, 128, 16)))


def test_an_explicit_offset_on_a_view_at_a_loop_variable_is_refused():
    @nki.jit
    def k(b):
        for s in nl.affine_range(2):
            t = nl.ndarray((1, 16), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=b[s:s + 1, :].ap([[16, 1], [1, 16]], 0))
        return b

    with pytest.raises(UnsupportedAPIError, match="depending on loop variables"):
        k(np.zeros((2, 16), np.float32))


@pytest.mark.parametrize("pattern, kwargs, err, match", [
    ([[32, 16], [1, 16]], {}, HardwareRuleError, "partition step"),
    ([[16, 16], [1, 12]], {"offset": 8}, UnsupportedAPIError, "runs past dimension 1"),
    ([[16, 16], [1, 16]], {"dtype": nl.bfloat16}, UnsupportedAPIError, r"ap\(dtype=\.\.\.\)"),
])
def test_refusals_name_the_rule(pattern, kwargs, err, match):
    @nki.jit
    def k(x):
        out = nl.ndarray((16, 16), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(out, nl.copy(t.ap(pattern, **kwargs)))
        return out

    with pytest.raises(err, match=match):
        k(np.zeros((16, 16), np.float32))


@nki.jit
def words_of_bytes(x):
    """uint8 storage read as uint32 words through a strided pattern: rows 0..31, every other
    word from word 1 (what ``.ap(dtype=)`` counts in: elements of the new dtype)."""
    out = nl.ndarray((32, 16), dtype=nl.uint32, buffer=nl.shared_hbm)
    t = nl.ndarray((32, 16), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.ap(pattern=[[32, 32], [2, 16]], offset=1, dtype=nl.uint32))
    nisa.dma_copy(dst=out, src=t)
    return out


def test_an_hbm_pattern_with_dtype_reads_the_storage_as_that_dtype():
    x = np.random.default_rng(4).integers(0, 256, (64, 128), dtype=np.uint8)
    words = x.view(np.uint32)  # [64, 32], little endian as the hardware
    np.testing.assert_array_equal(words_of_bytes(x), words[:32, 1::2])


@nki.jit
def float_bits_as_int(x):
    out = nl.ndarray((16, 8), dtype=nl.int32, buffer=nl.shared_hbm)
    t = nl.ndarray((16, 8), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.ap(pattern=[[16, 16], [1, 8]], offset=8, dtype=nl.int32))
    nisa.dma_copy(dst=out, src=t)
    return out


def test_same_width_reinterpretation_through_a_pattern():
    x = np.random.default_rng(5).standard_normal((16, 16)).astype(np.float32)
    np.testing.assert_array_equal(float_bits_as_int(x), x.view(np.int32)[:, 8:])
