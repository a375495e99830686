"""The plain matrix-product and transpose handlers (emulator/ops/linalg.py, shape.py): the fast
forms a training step's program runs (np.matmul itself, the transpose method) give what the
general forms give, on strided operands too, and stay off the cases they do not cover."""
from __future__ import annotations

import numpy as np
import pytest

import emulator.ops  # noqa: F401 - registers the handlers
from emulator.program.context import HandlerContext
from emulator.program.ops import OPS

_DOT = {"lhs_batch": [], "rhs_batch": [], "lhs_contracting": [1], "rhs_contracting": [0], "out_perm": []}


def _handler(op: str, attrs: dict, out: tuple, ins: list[tuple]):
    ctx = HandlerContext(op, op, attrs, out, ins, None, -1)
    return OPS[op].handler(ctx)


def test_a_plain_2d_dot_is_a_bare_matmul_and_reads_transposed_views():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    w = rng.standard_normal((120, 64)).astype(np.float32)
    f = _handler("dot", _DOT, ("f32", [32, 120]), [("f32", [32, 64]), ("f32", [64, 120])])
    assert f is np.matmul
    got = f(x, w.T)  # the weight's transpose as a strided view, as the step passes it
    ref = (x.astype(np.float64) @ w.T.astype(np.float64)).astype(np.float32)
    assert got.dtype == np.float32 and got.shape == (32, 120)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("lhs, rhs, out", [
    ("f32", "f32", "f64"),  # accumulates and returns in f64
    ("s8", "s8", "s32"),    # accumulates in the result type, never wraps at 8 bits
    ("f16", "f16", "f16"),  # computes in f32, rounds once
])
def test_a_2d_dot_with_other_dtypes_keeps_the_general_form(lhs, rhs, out):
    from emulator.program.dtypes import DTYPES

    f = _handler("dot", _DOT, (out, [3, 2]), [(lhs, [3, 4]), (rhs, [4, 2])])
    assert f is not np.matmul
    a = (np.arange(12).reshape(3, 4) * 11 % 127).astype(DTYPES[lhs])
    b = (np.arange(8).reshape(4, 2) * 7 % 127).astype(DTYPES[rhs])
    got = f(a, b)
    assert got.dtype == DTYPES[out]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=1e-3)


def test_a_contracting_first_dot_is_not_a_bare_matmul():
    lhs_first = dict(_DOT, lhs_contracting=[0])
    f = _handler("dot", lhs_first, ("f32", [3, 2]), [("f32", [4, 3]), ("f32", [4, 2])])
    assert f is not np.matmul
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    b = np.arange(8, dtype=np.float32).reshape(4, 2)
    np.testing.assert_array_equal(f(a, b), a.T @ b)


def test_a_2d_outer_product_is_not_a_bare_matmul():
    """No contracting dims: [8,3] x [8,3] -> [8,3,8,3] (torch's bilinear interpolate makes one)."""
    outer = dict(_DOT, lhs_contracting=[], rhs_contracting=[])
    f = _handler("dot", outer, ("f32", [8, 3, 8, 3]), [("f32", [8, 3]), ("f32", [8, 3])])
    assert f is not np.matmul
    a = np.arange(24, dtype=np.float32).reshape(8, 3)
    np.testing.assert_array_equal(f(a, a), np.multiply.outer(a, a))


@pytest.mark.parametrize("shape, perm", [((3, 4), (1, 0)), ((2, 3, 4), (2, 0, 1)), ((5,), (0,)), ((), ())])
def test_transpose_gives_numpys_transpose(shape, perm):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    out = tuple(shape[p] for p in perm)
    f = _handler("transpose", {"perm": list(perm)}, ("f32", list(out)), [("f32", list(shape))])
    got = f(x)
    np.testing.assert_array_equal(got, np.transpose(x, perm))
    assert got.shape == out
    if len(shape) >= 2:
        assert np.shares_memory(got, x)  # a view, as np.transpose gives
