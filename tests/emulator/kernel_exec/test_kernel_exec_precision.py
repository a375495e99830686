"""NKI_PRECISE_FP (kernel_exec/precision.py): low-precision on-chip tiles stored in their types
(the default, every write rounds) or as float32 (``0``), against NumPy; HBM tensors and
bit-cast tiles keep their types; a bad setting is named."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from emulator.kernel_exec import OutOfBoundsAccessError
from emulator.kernel_exec.precision import LOW_PRECISION, PrecisionSettingError, precise_fp
from neuron_customcall import nki
from neuron_customcall.nki import isa as nisa
from neuron_customcall.nki import language as nl

BF16 = ml_dtypes.bfloat16


@nki.jit
def square_via_bf16(x):
    """``square(x * 2 + c)`` into a bf16 tile, then widened to fp32 (AWS's activation example)."""
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    out_bf16 = nl.ndarray(x.shape, nl.bfloat16, buffer=nl.shared_hbm)
    t = nl.load(x)
    sq = nisa.activation(op=np.square, data=t, scale=2.0, dtype=nl.bfloat16)
    nl.store(out, sq)
    nl.store(out_bf16, sq)
    return out, out_bf16


def test_the_default_rounds_low_precision_tiles(monkeypatch):
    monkeypatch.delenv("NKI_PRECISE_FP", raising=False)
    x = np.random.default_rng(0).uniform(1, 3, (128, 64)).astype(np.float32)
    out, out_bf16 = square_via_bf16(x)
    want = np.square(x * np.float32(2))
    np.testing.assert_array_equal(out, want.astype(BF16).astype(np.float32))
    assert out_bf16.dtype == BF16


def test_precise_fp_0_keeps_float32_on_chip_but_hbm_keeps_its_type(monkeypatch):
    x = np.random.default_rng(0).uniform(1, 3, (128, 64)).astype(np.float32)
    want = np.square(x * np.float32(2))
    monkeypatch.setenv("NKI_PRECISE_FP", "0")
    out, out_bf16 = square_via_bf16(x)
    np.testing.assert_array_equal(out, want)  # no rounding through the bf16 tile
    assert out_bf16.dtype == BF16  # the caller's bf16 output is still bf16
    np.testing.assert_array_equal(out_bf16, want.astype(BF16))
    monkeypatch.setenv("NKI_PRECISE_FP", "1")  # the same traced kernel, rounding again
    out, _ = square_via_bf16(x)
    np.testing.assert_array_equal(out, want.astype(BF16).astype(np.float32))


@nki.jit
def bits_of_bf16(x):
    """A bf16 tile's bits read as uint16: the tile must keep bf16's layout in either mode."""
    out = nl.ndarray(x.shape, nl.uint16, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out.view(nl.bfloat16), t)
    return out


@pytest.mark.parametrize("setting", ["0", "1"])
def test_reinterpreted_bits_are_those_of_the_declared_type(monkeypatch, setting):
    monkeypatch.setenv("NKI_PRECISE_FP", setting)
    x = np.random.default_rng(1).standard_normal((128, 8)).astype(BF16)
    np.testing.assert_array_equal(bits_of_bf16(x), x.view(np.uint16))


def test_the_setting_is_read_and_checked():
    assert precise_fp({}) and precise_fp({"NKI_PRECISE_FP": "1"})
    assert not precise_fp({"NKI_PRECISE_FP": " 0 "})
    with pytest.raises(PrecisionSettingError, match="NKI_PRECISE_FP='yes'"):
        precise_fp({"NKI_PRECISE_FP": "yes"})
    assert {"bfloat16", "float8_e4m3fn", "float8_e5m2"} <= LOW_PRECISION
    assert "float16" not in LOW_PRECISION and "float8_e8m0fnu" not in LOW_PRECISION


def test_an_out_of_bounds_access_is_also_an_index_error():
    assert issubclass(OutOfBoundsAccessError, IndexError)
