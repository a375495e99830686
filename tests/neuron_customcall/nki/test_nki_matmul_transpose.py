"""``nisa.nc_matmul(stationary, identity, is_transpose=True)``: TensorE's transpose mode."""

from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np
import pytest

from neuron_customcall import nki
from neuron_customcall.nki import HardwareRuleError
from neuron_customcall.nki import isa as nisa
from neuron_customcall.nki import language as nl
from emulator.kernel_exec import KernelRuntimeError



def line_of(fn, text: str) -> int:
    """Line number of the first source line of the kernel containing ``text``."""
    lines, start = inspect.getsourcelines(fn.func)
    return start + next(i for i, ln in enumerate(lines) if text in ln)


@nki.jit
def pe_transpose(a):
    """[K, M] -> [M, K] through the PE array, in a's dtype, one tile per program."""
    k, m = a.shape[0] // nl.num_programs(0), a.shape[1]
    out = nl.ndarray((m, a.shape[0]), dtype=a.dtype, buffer=nl.shared_hbm)
    ident = nl.load(nl.shared_identity_matrix(k, dtype=a.dtype))
    i = nl.program_id(0) * k
    t = nisa.nc_matmul(nl.load(a[i + nl.arange(k)[:, None], nl.arange(m)[None, :]]), ident,
                       is_transpose=True)
    nl.store(out[nl.arange(m)[:, None], i + nl.arange(k)[None, :]], value=nl.copy(t))
    return out


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.float16])
def test_transpose_mode_matches_numpy_in_the_input_dtype(dtype):
    a = np.random.default_rng(0).standard_normal((256, 96)).astype(dtype)
    a[3, 5] = np.nan  # passes through the array untouched
    out = pe_transpose[2](a)
    assert out.dtype == a.dtype
    np.testing.assert_array_equal(out.view(np.uint8), np.ascontiguousarray(a.T).view(np.uint8))


def test_transpose_mode_result_keeps_the_dtype_and_lives_in_psum():
    seen = {}

    @nki.jit
    def k(a):
        ident = nl.load(nl.shared_identity_matrix(64, dtype=nl.bfloat16))
        t = nisa.nc_matmul(nl.load(a), ident, is_transpose=True)
        seen["t"] = (t.dtype_name, t.buffer, t.shape)
        out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=t)
        return out

    k(np.zeros((64, 32), ml_dtypes.bfloat16))
    assert seen["t"] == ("bfloat16", "psum", (32, 64))


def _raises(kernel, args, text, rule, *fragments, cls=HardwareRuleError):
    with pytest.raises(cls) as e:
        kernel(*args)
    msg = str(e.value)
    assert f"{__file__}:{line_of(kernel, text)}" in msg, msg
    for f in (rule,) + fragments:
        assert f in msg, msg


def test_transpose_mode_rules_are_checked_while_tracing():
    @nki.jit
    def not_square(a, b):
        t = nisa.nc_matmul(nl.load(a), nl.load(b), is_transpose=True)  # HERE
        return a

    f32 = np.zeros
    _raises(not_square, [f32((64, 32), np.float32), f32((64, 128), np.float32)], "# HERE",
            "matmul transpose operand", "[64, 64] identity matrix", "got [64, 128]")
    _raises(not_square, [f32((64, 32), np.float32), f32((64, 64), np.float16)], "# HERE",
            "matmul transpose dtype", "float16", "float32")
    _raises(not_square, [f32((64, 200), np.float32), f32((64, 64), np.float32)], "# HERE",
            "matmul stationary size", "200")


def test_transpose_mode_with_a_moving_that_is_not_the_identity_fails_at_run_time():
    @nki.jit
    def wrong(a, b):
        t = nisa.nc_matmul(nl.load(a), nl.load(b), is_transpose=True)  # HERE
        out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=t)
        return out

    a = np.ones((32, 16), np.float32)
    np.testing.assert_array_equal(wrong(a, np.eye(32, dtype=np.float32)), a.T)
    _raises(wrong, [a, np.ones((32, 32), np.float32)], "# HERE", "matmul transpose operand",
            "identity", cls=KernelRuntimeError)


def test_plain_nc_matmul_still_gives_fp32():
    @nki.jit
    def mm(a, b):
        t = nisa.nc_matmul(nl.load(a), nl.load(b))
        out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=t)
        return out

    a = np.random.default_rng(1).standard_normal((64, 32)).astype(np.float16)
    b = np.random.default_rng(2).standard_normal((64, 48)).astype(np.float16)
    r = mm(a, b)
    assert r.dtype == np.float32
    np.testing.assert_allclose(r, a.astype(np.float32).T @ b.astype(np.float32), rtol=1e-5,
                               atol=1e-5)


def test_operand_dtypes_any_in_transpose_mode_floats_otherwise():
    @nki.jit
    def int_mm(a, b, transpose):
        t = nisa.nc_matmul(nl.load(a), nl.load(b), is_transpose=transpose)  # HERE
        out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=t)
        return out

    a = np.arange(32 * 8, dtype=np.int32).reshape(32, 8)
    np.testing.assert_array_equal(int_mm(a, np.eye(32, dtype=np.int32), True), a.T)
    _raises(int_mm, [a, np.eye(32, dtype=np.int32), False], "# HERE", "matmul operand dtype",
            "stationary operand", "int32", "bfloat16")
