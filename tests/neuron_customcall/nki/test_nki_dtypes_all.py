"""Every NKI dtype of both generations (nki.api.shared "Supported Data Types", the beta 2 stub's
dtype constants), through the one dtype record: kernels move and compute in each against NumPy,
the packed x4 types are what the reference says (four float8 values in 32 bits, four float4 in
16), and NKI's type-promotion table holds."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from emulator import dtypes as records
from emulator.kernel_ir import dtypes as ir_dtypes
from neuron_customcall import nki
from neuron_customcall.nki import dtypes as nkd
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import KernelTraceError

#: nl name -> NumPy storage of its values (None: stored as the record says, no own NumPy type).
SCALAR_DTYPES = {
    "uint8": np.uint8, "int8": np.int8, "uint16": np.uint16, "int16": np.int16,
    "uint32": np.uint32, "int32": np.int32, "float16": np.float16, "float32": np.float32,
    "bfloat16": ml_dtypes.bfloat16, "float8_e4m3": ml_dtypes.float8_e4m3,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2,
    "float8_e8m0fnu": ml_dtypes.float8_e8m0fnu, "bool_": np.bool_,
}
PACKED = {"float8_e5m2_x4": (np.uint32, ml_dtypes.float8_e5m2),
          "float8_e4m3fn_x4": (np.uint32, ml_dtypes.float8_e4m3fn),
          "float4_e2m1fn_x4": (np.uint16, ml_dtypes.float4_e2m1fn)}


@pytest.mark.parametrize("name", sorted(SCALAR_DTYPES))
def test_each_dtype_is_its_numpy_type_and_an_ir_name(name):
    assert getattr(nl, name) is SCALAR_DTYPES[name]
    ir = nkd.name_of(getattr(nl, name))
    assert ir_dtypes.to_numpy(ir) == np.dtype(SCALAR_DTYPES[name])
    assert nkd.name_of(ir) == ir  # beta 2 spells dtypes as strings


def test_tfloat32_and_the_fp32_alias():
    assert nl.tfloat32 == "tfloat32" and nkd.name_of(nl.tfloat32) == "tfloat32"
    assert nkd.name_of(nl.fp32) == "float32"
    # beta 1: fp32.min is the bit pattern 0xff7fffff, bfp16.min 0xff80
    assert np.float32(nl.fp32.min) == np.finfo(np.float32).min
    assert np.array(nl.fp32.min, np.float32).view(np.uint32) == 0xFF7FFFFF
    assert np.array(nl.bfp16.min, ml_dtypes.bfloat16).view(np.uint16) == 0xFF80


@nki.jit
def roundtrip(a, dtype):
    """Load, convert to ``dtype`` on chip, convert back, store."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    nl.store(out, nl.copy(nl.copy(t, dtype=dtype), dtype=a.dtype))
    return out


@pytest.mark.parametrize("name", sorted(set(SCALAR_DTYPES) - {"bool_"}))
def test_a_kernel_rounds_through_each_dtype_as_numpy(name):
    rng = np.random.default_rng(1)
    dt = np.dtype(SCALAR_DTYPES[name])
    if dt.kind in "iu":
        info = np.iinfo(dt)
        a = rng.integers(max(info.min, -1000), min(info.max, 1000), (128, 16)).astype(np.float32)
    else:
        a = (rng.standard_normal((128, 16)) * 4).astype(np.float32)
        if name == "float8_e8m0fnu":
            a = np.abs(a) + 0.01  # unsigned exponents only
    got = roundtrip(a, getattr(nl, name))
    want = a.astype(dt).astype(np.float32)
    np.testing.assert_array_equal(got, want)


@nki.jit
def add_in(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.load(a), nl.load(b)))
    return out


@pytest.mark.parametrize("dt", [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
                                ml_dtypes.float8_e4m3, ml_dtypes.bfloat16])
def test_narrow_float_arithmetic_is_fp32_then_rounded(dt):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((128, 32)).astype(dt)
    b = rng.standard_normal((128, 32)).astype(dt)
    got = add_in(a, b)
    assert got.dtype == np.dtype(dt)
    want = (a.astype(np.float32) + b.astype(np.float32)).astype(dt)
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


@pytest.mark.parametrize("name", sorted(PACKED))
def test_packed_types_are_four_elements_per_word(name):
    word, element = PACKED[name]
    r = records.BY_NKI[name]
    assert r.kind == records.PACKED and r.lanes == 4 and r.numpy == np.dtype(word)
    assert getattr(nl, name) == name and nkd.numpy_dtype(name) == name
    rng = np.random.default_rng(3)
    values = (rng.standard_normal((5, 7, 4)) * 2).astype(element).astype(np.float32)
    words = records.pack(values, r)
    assert words.dtype == np.dtype(word) and words.shape == (5, 7)
    np.testing.assert_array_equal(records.unpack(words, r), values)
    if word is np.uint32:  # little endian: the uint8 codes of a [..., 4] array viewed as words
        codes = values.astype(element).view(np.uint8)
        np.testing.assert_array_equal(codes.view(np.uint32).reshape(5, 7), words)


@nki.jit
def move_packed(a):
    """Load words, view them as the packed type on chip, view back, store: bits unchanged."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a.view(nl.float8_e4m3fn_x4))
    nl.store(out.view(nl.float8_e4m3fn_x4), t)
    return out


def test_a_kernel_moves_packed_tiles_bit_exactly():
    a = np.random.default_rng(4).integers(0, 2**32, (128, 8), dtype=np.uint32)
    np.testing.assert_array_equal(move_packed(a), a)


@nki.jit
def add_packed(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a.view(nl.float8_e5m2_x4))
    nl.store(out.view(nl.float8_e5m2_x4), nl.add(t, t))
    return out


def test_arithmetic_on_a_packed_tile_is_refused_by_name():
    with pytest.raises(KernelTraceError, match=r"packed dtype: add on tile .* float8_e5m2_x4"):
        add_packed(np.zeros((128, 8), np.uint32))


# NKI's type promotion table (nki.api.shared "NKI Type Promotion"), every listed example.
PROMOTIONS = [
    ("int32", "float16", "float16"), ("uint16", "tfloat32", "tfloat32"),
    ("float32", "tfloat32", "float32"), ("float32", "bfloat16", "float32"),
    ("float16", "bfloat16", "float32"), ("float8_e4m3", "float16", "float16"),
    ("float8_e4m3", "bfloat16", "bfloat16"), ("float8_e4m3", "float8_e5m2", "bfloat16"),
    ("int16", "int32", "int32"), ("uint8", "uint16", "uint16"), ("uint16", "int32", "int32"),
    ("int8", "uint8", "int16"), ("int8", "uint16", "int32"), ("int32", "uint32", "float32"),
]


@pytest.mark.parametrize("a,b,want", PROMOTIONS)
def test_type_promotion_table(a, b, want):
    assert nkd.promote(a, b) == want and nkd.promote(b, a) == want


@pytest.mark.parametrize("tile,scalar,want", [
    ("int8", 2, "int32"), ("float16", 1.2, "float32"),        # weakly typed: widest
    ("float16", np.float16(2), "float16"), ("int8", np.int8(2), "int8"),  # typed scalars
    ("bfloat16", True, "bfloat16"),                           # bool -> uint8 yields to a float
])
def test_scalar_promotion(tile, scalar, want):
    assert nkd.promote_scalar(tile, scalar) == want


@nki.jit
def scale(a, s):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.multiply(nl.load(a), s)
    assert t.dtype == (np.float16 if isinstance(s, np.float16) else np.float32)
    nl.store(out, t)
    return out


def test_a_weak_float_scalar_widens_a_float16_tile_and_a_typed_one_does_not():
    a = np.full((4, 8), 1.0009765625, np.float16)  # 1 + 2**-10
    wide = scale(a, 3.0)
    narrow = scale(a, np.float16(3.0))
    assert wide[0, 0] == np.float32(3.0029296875)
    assert narrow[0, 0] == np.float32(np.float16(3.0029296875))


def test_finfo_follows_numpy_and_ml_dtypes():
    assert nl.finfo(nl.bfloat16).max == ml_dtypes.finfo(ml_dtypes.bfloat16).max
    assert nl.finfo(nl.float8_e4m3fn).max == 448
    assert nl.finfo(np.float32).eps == np.finfo(np.float32).eps
    with pytest.raises(TypeError, match="tfloat32"):
        nl.finfo(nl.tfloat32)


@pytest.mark.parametrize("generation", ["beta1", "beta2"])
def test_activation_dtype_rounds_the_fp32_result_once(generation):
    """ScalarE computes in fp32 and rounds once into the requested dtype, as the simulator
    does: ``activation(op=np.square, data=b, dtype=nl.bfloat16)`` holds bf16 values (8
    significant bits), which an fp32 store widens unchanged; with fp32 nothing is rounded."""
    from neuron_customcall.nki import isa as nisa1
    from neuron_customcall.nki.isa import beta2 as nisa

    x = np.random.default_rng(3).uniform(1.0, 3.0, (64, 32)).astype(np.float32)

    @nki.jit
    def k(x):
        out = nl.ndarray((3, 64, 32), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        for i, dt in enumerate((nl.bfloat16, nl.float16, nl.float32)):
            if generation == "beta1":
                nl.store(out[i], nisa1.activation(op=np.square, data=t, dtype=dt))
            else:
                d = nl.ndarray((64, 32), dt, buffer=nl.sbuf)
                nisa.activation(dst=d, op=np.square, data=t)
                nl.store(out[i], nl.copy(d, dtype=nl.float32))
        return out

    out = k(x)
    sq = np.square(x)
    np.testing.assert_array_equal(out[0], sq.astype(ml_dtypes.bfloat16).astype(np.float32))
    np.testing.assert_array_equal(out[1], sq.astype(np.float16).astype(np.float32))
    np.testing.assert_array_equal(out[2], sq)
    assert not np.array_equal(out[0], sq)  # the rounding is visible
