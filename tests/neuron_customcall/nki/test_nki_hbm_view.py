"""Bit-cast views of HBM tensors (``tensor.view(dtype)``): loads and stores reinterpret the bits
on chip; other uses are trace errors naming the rule and the line."""

from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np
import pytest

from neuron_customcall import nki
from neuron_customcall.nki import KernelTraceError
from neuron_customcall.nki import language as nl


@nki.jit
def abs_by_bits(a):
    """|a| for float32 by clearing the sign bit of its int32 view, stored through an int32 view
    of a float32 output."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    bits = nl.load(a.view(nl.int32))
    nl.store(out.view(nl.int32), value=nl.bitwise_and(bits, 0x7FFFFFFF))
    return out


def test_float32_sign_bit_cleared_through_int32_views():
    a = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)
    a[0, 0] = -0.0
    np.testing.assert_array_equal(abs_by_bits(a).view(np.int32), np.abs(a).view(np.int32))


@nki.jit
def halves(x):
    """bfloat16 <-> uint16 views, indexed after viewing, in a grid, plus a dtype on load."""
    out = nl.ndarray(x.shape, dtype=nl.uint16, buffer=nl.shared_hbm)
    wide = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.shared_hbm)
    i = nl.program_id(0) * 8 + nl.arange(8)[:, None]
    j = nl.arange(x.shape[1])[None, :]
    raw = nl.load(x.view(nl.uint16)[i, j])
    nl.store(out[i, j], value=raw)
    nl.store(wide[i, j], value=nl.load(x.view(nl.uint16)[i, j], dtype=nl.int32))
    back = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(back.view(nl.uint16)[i, j], value=raw)
    return out, wide, back


def test_bfloat16_views_indexed_in_a_grid():
    x = np.random.default_rng(1).standard_normal((16, 24)).astype(ml_dtypes.bfloat16)
    out, wide, back = halves[2](x)
    np.testing.assert_array_equal(out, x.view(np.uint16))
    np.testing.assert_array_equal(wide, x.view(np.uint16).astype(np.int32))
    np.testing.assert_array_equal(back.view(np.uint16), x.view(np.uint16))


def _line(fn, text):
    lines, start = inspect.getsourcelines(fn.func)
    return start + next(i for i, ln in enumerate(lines) if text in ln)


def _raises(kernel, args, text, *fragments):
    with pytest.raises(KernelTraceError) as e:
        kernel(*args)
    msg = str(e.value)
    assert f"{__file__}:{_line(kernel, text)}" in msg, msg
    for f in fragments:
        assert f in msg, msg


def test_other_uses_of_an_hbm_view_are_trace_errors():
    @nki.jit
    def rmw(a, b):
        nl.atomic_rmw(a.view(nl.int32), value=nl.load(b), op=nl.add)  # HERE

    @nki.jit
    def result(a):
        return a.view(nl.int32)

    @nki.jit
    def narrow(a):
        v = a.view(nl.bfloat16)  # HERE
        return a

    f = np.zeros((4, 4), np.float32)
    i = np.zeros((4, 4), np.int32)
    _raises(rmw, [f, i], "# HERE", "bit-cast view of an HBM tensor", "nl.atomic_rmw",
            "float32 viewed as int32", "nl.load", "nl.store")
    _raises(result, [f], "@nki.jit", "bit-cast view of an HBM tensor", "returns whole HBM tensors")
    _raises(narrow, [f], "# HERE", "invalid view", "keeps the element width")


def test_assignment_through_views_loads_and_stores():
    @nki.jit
    def via_setitem(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, dtype=nl.int32)
        t[...] = a.view(nl.int32)
        out.view(nl.int32)[...] = t
        return out

    a = np.random.default_rng(2).standard_normal((8, 16)).astype(np.float32)
    np.testing.assert_array_equal(via_setitem(a).view(np.int32), a.view(np.int32))
