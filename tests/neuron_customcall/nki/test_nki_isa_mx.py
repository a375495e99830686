"""``nisa.quantize_mx`` and ``nisa.nc_matmul_mx`` (issue 13) against NumPy references written
from the reference's text: groups of 8 partitions x 4 consecutive free elements share an E8M0
scale ``X = 2^(floor(log2 max|v|) - (E_max - 1))`` (2^-127 for an all-zero group), elements are
``v / X`` rounded to the float8 type and packed four to a word (element i at bits [8i, 8i+8));
nc_matmul_mx contracts the partitions and each word's four elements of the dequantized tiles.
Scales sit in the quadrant of their group (group i at partition (i // 4) * 32 + i % 4)."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from neuron_customcall.nki.isa import beta2 as nisa  # the SDK's `nki.isa` (beta 2)
from neuron_customcall import nki
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import HardwareRuleError

BF16 = ml_dtypes.bfloat16
ELEMENTS = {"float8_e4m3fn_x4": (ml_dtypes.float8_e4m3fn, 8, 8),
            "float8_e5m2_x4": (ml_dtypes.float8_e5m2, 15, 8),
            "float4_e2m1fn_x4": (ml_dtypes.float4_e2m1fn, 2, 4)}


def ref_quantize(x: np.ndarray, packed: str):
    """Element by element: (words [P, F/4] as uint, scale codes [P/8, F/4] uint8)."""
    el, emax, bits = ELEMENTS[packed]
    p, f = x.shape
    words = np.zeros((p, f // 4), np.uint64)
    codes = np.zeros((p // 8, f // 4), np.uint8)
    for g in range(p // 8):
        for w in range(f // 4):
            block = x[g * 8:(g + 1) * 8, w * 4:(w + 1) * 4].astype(np.float32)
            amax = float(np.abs(block).max())
            e = -127 if amax == 0 else max(-127, math.floor(math.log2(amax)) - (emax - 1))
            codes[g, w] = e + 127
            for r in range(8):
                word = 0
                for i in range(4):
                    q = np.float32(block[r, i] / np.float32(2.0 ** e)).astype(el)
                    word |= int(q.view(np.uint8) & ((1 << bits) - 1)) << (bits * i)
                words[g * 8 + r, w] = word
    return words, codes


def hw_scales(codes: np.ndarray, p: int, width: int | None = None) -> np.ndarray:
    """Logical scale codes [P/8, W] placed as the hardware reads them ([P//8 or P, W])."""
    rows = codes.shape[0]
    out = np.zeros((p if p > 32 else rows, width or codes.shape[1]), np.uint8)
    for i in range(rows):
        out[(i // 4) * 32 + i % 4 if p > 32 else i, :codes.shape[1]] = codes[i]
    return out


def ref_dequantize(words: np.ndarray, codes: np.ndarray, packed: str) -> np.ndarray:
    el, _, bits = ELEMENTS[packed]
    p, w = words.shape
    out = np.zeros((p, w, 4), np.float32)
    for r in range(p):
        for c in range(w):
            for i in range(4):
                code = (int(words[r, c]) >> (bits * i)) & ((1 << bits) - 1)
                out[r, c, i] = np.array([code], np.uint8).view(el).astype(np.float32)[0] \
                    * np.float32(2.0 ** (int(codes[r // 8, c]) - 127))
    return out


@nki.jit
def quantize(x, packed, scale_dtype, scale_rows):
    p, f = x.shape
    data = nl.ndarray((p, f // 4), packed, buffer=nl.shared_hbm)
    scales = nl.ndarray((scale_rows, f // 4), scale_dtype, buffer=nl.shared_hbm)
    src = nl.ndarray((p, f), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=x)
    q = nl.ndarray((p, f // 4), packed, buffer=nl.sbuf)
    sc = nl.zeros((scale_rows, f // 4), scale_dtype, buffer=nl.sbuf)
    nisa.quantize_mx(dst=q, src=src, dst_scale=sc)
    nisa.dma_copy(dst=data, src=q)
    nisa.dma_copy(dst=scales, src=sc)
    return data, scales


@pytest.mark.parametrize("packed", ["float8_e4m3fn_x4", "float8_e5m2_x4"])
@pytest.mark.parametrize("p,f,dtype", [(32, 16, BF16), (64, 8, np.float16), (128, 12, BF16)])
def test_quantize_mx_matches_the_reference(packed, p, f, dtype):
    rng = np.random.default_rng(p + f)
    x = (rng.standard_normal((p, f)) * np.exp2(rng.integers(-6, 7, (p, f)))).astype(dtype)
    x[0:8, 0:4] = 0  # an all-zero group: scale 2^-127 (code 0)
    words, codes = ref_quantize(x, packed)
    rows = p // 8 if p <= 32 else p
    got_words, got_scales = quantize(x, packed, nl.uint8, rows)
    np.testing.assert_array_equal(got_words.astype(np.uint64), words)
    np.testing.assert_array_equal(got_scales, hw_scales(codes, p))
    assert codes[0, 0] == 0
    _, e8 = quantize(x, packed, nl.float8_e8m0fnu, rows)  # the same scales as E8M0 values
    used = hw_scales(np.ones_like(codes), p) == 1  # (E8M0 has no 0: the rest is its NaN)
    np.testing.assert_array_equal(e8.view(np.uint8)[used], hw_scales(codes, p)[used])


@nki.jit
def matmul_mx(st_words, mv_words, st_codes, mv_codes, st_dtype, mv_dtype, out_dtype):
    k, m = st_words.shape
    n = mv_words.shape[1]
    out = nl.ndarray((m, n), nl.float32, buffer=nl.shared_hbm)
    st = nl.ndarray((k, m), st_dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=st, src=st_words.view(st_dtype))
    mv = nl.ndarray((k, n), mv_dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mv, src=mv_words.view(mv_dtype))
    ss = nl.ndarray(st_codes.shape, nl.uint8, buffer=nl.sbuf)
    nisa.dma_copy(dst=ss, src=st_codes)
    ms = nl.ndarray(mv_codes.shape, nl.float8_e8m0fnu, buffer=nl.sbuf)
    nisa.dma_copy(dst=ms, src=mv_codes.view(nl.float8_e8m0fnu))
    ps = nl.ndarray((m, n), out_dtype, buffer=nl.psum)
    for rep in nl.affine_range(2):  # accumulate=None: the second product adds
        nisa.nc_matmul_mx(ps, st, mv, ss, ms)
    r = nl.ndarray((m, n), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=ps)
    nisa.dma_copy(dst=out, src=r)
    return out


def _random_mx(rng, packed: str, k: int, w: int):
    el, _, bits = ELEMENTS[packed]
    codes_el = rng.integers(0, 1 << bits, (k, w, 4)).astype(np.uint8)
    vals = codes_el.view(el).astype(np.float32)
    codes_el[~np.isfinite(vals)] = 0  # no NaN/inf elements
    words = np.zeros((k, w), np.uint64)
    for i in range(4):
        words |= codes_el[..., i].astype(np.uint64) << np.uint64(bits * i)
    scale = rng.integers(120, 134, (k // 8, w)).astype(np.uint8)
    store = np.uint32 if bits == 8 else np.uint16
    return words.astype(store), scale


@pytest.mark.parametrize("st_packed,mv_packed", [("float8_e4m3fn_x4", "float8_e5m2_x4"),
                                                 ("float4_e2m1fn_x4", "float8_e4m3fn_x4"),
                                                 ("float4_e2m1fn_x4", "float4_e2m1fn_x4")])
@pytest.mark.parametrize("k", [32, 128])
def test_nc_matmul_mx_matches_the_dequantized_product(st_packed, mv_packed, k):
    rng = np.random.default_rng(k)
    m, n = 16, 40
    st, st_codes = _random_mx(rng, st_packed, k, m)
    mv, mv_codes = _random_mx(rng, mv_packed, k, n)
    want = 2 * np.einsum("kmq,knq->mn", ref_dequantize(st, st_codes, st_packed),
                         ref_dequantize(mv, mv_codes, mv_packed), dtype=np.float64)
    got = matmul_mx(st, mv, hw_scales(st_codes, k, m + 8), hw_scales(mv_codes, k), st_packed,
                    mv_packed, nl.float32)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * np.abs(want).max())


@nki.jit
def quantize_then_matmul(a, b):
    """On-device quantization of both operands, then the MX matmul: bf16 in, fp32 out."""
    k, m4 = a.shape
    n4 = b.shape[1]
    out = nl.ndarray((m4 // 4, n4 // 4), nl.float32, buffer=nl.shared_hbm)
    sa = nl.ndarray((k, m4), nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=sa, src=a)
    sb = nl.ndarray((k, n4), nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=sb, src=b)
    qa = nl.ndarray((k, m4 // 4), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    qb = nl.ndarray((k, n4 // 4), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    scales = nl.ndarray((k, n4 // 4), nl.float8_e8m0fnu, buffer=nl.sbuf)  # both, packed
    nisa.quantize_mx(dst=qa, src=sa, dst_scale=scales[4:, 0:m4 // 4])
    nisa.quantize_mx(dst=qb, src=sb, dst_scale=scales[0:, :])
    ps = nl.ndarray((m4 // 4, n4 // 4), nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(ps, qa, qb, scales[4:, :], scales, accumulate=False)
    r = nl.ndarray((m4 // 4, n4 // 4), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=ps)
    nisa.dma_copy(dst=out, src=r)
    return out


def test_quantize_then_matmul_with_scales_packed_in_one_tile():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((128, 64)).astype(BF16)
    b = rng.standard_normal((128, 256)).astype(BF16)
    got = quantize_then_matmul(a, b)
    wa, ca = ref_quantize(a, "float8_e4m3fn_x4")
    wb, cb = ref_quantize(b, "float8_e4m3fn_x4")
    want = np.einsum("kmq,knq->mn", ref_dequantize(wa, ca, "float8_e4m3fn_x4"),
                     ref_dequantize(wb, cb, "float8_e4m3fn_x4"), dtype=np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    exact = np.einsum("kmq,knq->mn", a.astype(np.float32).reshape(128, 16, 4),
                      b.astype(np.float32).reshape(128, 64, 4))
    assert np.abs(got - exact).max() < 0.1 * np.abs(exact).max()  # fp8: a few per cent


@pytest.mark.parametrize("what,message", [
    ("src_dtype", r"src is a 2-D float16 or bfloat16 tile, got float32"),
    ("partitions", r"multiple of 32 partitions"),
    ("scale_rows", r"needs at least \[100, 4\]"),
    ("fp4_dst", r"dst is a 2-D float8_e5m2_x4 or float8_e4m3fn_x4 tile"),
])
def test_quantize_mx_argument_rules(what, message):
    @nki.jit
    def bad(x):
        p = 48 if what == "partitions" else 128
        src = nl.ndarray((p, 16), nl.float32 if what == "src_dtype" else nl.bfloat16,
                         buffer=nl.sbuf)
        q = nl.ndarray((p, 4), nl.float4_e2m1fn_x4 if what == "fp4_dst" else
                       nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        sc = nl.ndarray((64 if what == "scale_rows" else p, 4), nl.uint8, buffer=nl.sbuf)
        nisa.quantize_mx(dst=q, src=src, dst_scale=sc)
        return x

    with pytest.raises(HardwareRuleError, match=message):
        bad(np.zeros((1, 1), np.float32))


def test_nc_matmul_mx_argument_rules():
    @nki.jit
    def bad(x, m, tiling):
        st = nl.ndarray((64, m), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        mv = nl.ndarray((64, 32), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        sc = nl.ndarray((64, 128), nl.uint8, buffer=nl.sbuf)
        ps = nl.ndarray((m, 32), nl.float32, buffer=nl.psum)
        nisa.nc_matmul_mx(ps, st, mv, sc, sc, *tiling)
        return x

    x = np.zeros((1, 1), np.float32)
    with pytest.raises(HardwareRuleError, match="free size is even and at most 128"):
        bad(x, 15, ())
    with pytest.raises(HardwareRuleError, match="only row tiling"):
        bad(x, 16, ((0, 64), (64, 64)))
    bad(x, 16, ((64, 0), (64, 128)))  # the bottom half of the array: fine
