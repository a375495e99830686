"""dynamic-slice and dynamic-update-slice (emulator/ops/indexing.py) build their window from the
start indices by rank-specialised code (one movable dimension, none, several): every start, signed
or unsigned, in range or not, must be clamped into [0, dim - size] as XLA does, and the update
must land in the same window, in place only when the handler may write there."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import emulator.ops  # noqa: F401 - registers the handlers
from emulator.program.context import HandlerContext
from emulator.program.ops import OPS


def _handler(op: str, shape: tuple[int, ...], sizes: tuple[int, ...], starts_dtype: str, reuse: int = -1) -> Any:
    starts = [("s32" if starts_dtype == "int32" else "u32", [])] * len(shape)
    if op == "dynamic-slice":
        ctx = HandlerContext(op, "ds", {"sizes": list(sizes)}, ("f32", list(sizes)),
                             [("f32", list(shape)), *starts], None)
    else:
        ctx = HandlerContext(op, "dus", {}, ("f32", list(shape)),
                             [("f32", list(shape)), ("f32", list(sizes)), *starts], None, reuse)
    return OPS[op].handler(ctx)


def _reference_window(shape: tuple[int, ...], sizes: tuple[int, ...], starts: list[int]) -> tuple[slice, ...]:
    return tuple(slice(c, c + n) for c, n in ((min(max(s, 0), d - n), n) for s, d, n in zip(starts, shape, sizes)))


@st.composite
def _windows(draw: Any) -> tuple[tuple[int, ...], tuple[int, ...], list[int], str]:
    rank = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=rank, max_size=rank)))
    sizes = tuple(draw(st.integers(0, d)) for d in shape)
    dtype = draw(st.sampled_from(["int32", "uint32"]))
    bound = 2 ** 31 - 1 if dtype == "int32" else 2 ** 32 - 1
    low = -(2 ** 31) if dtype == "int32" else 0
    starts = draw(st.lists(st.one_of(st.integers(max(low, -3), 8), st.integers(low, bound)), min_size=rank, max_size=rank))
    return shape, sizes, starts, dtype


@settings(max_examples=300, deadline=None)
@given(_windows())
def test_dynamic_slice_clamps_every_start_like_xla(case: Any) -> None:
    shape, sizes, starts, dtype = case
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    got = _handler("dynamic-slice", shape, sizes, dtype)(x, *[np.dtype(dtype).type(s) for s in starts])
    np.testing.assert_array_equal(got, x[_reference_window(shape, sizes, starts)])
    assert got.shape == sizes


@settings(max_examples=300, deadline=None)
@given(_windows(), st.booleans())
def test_dynamic_update_slice_writes_the_clamped_window(case: Any, in_place: bool) -> None:
    shape, sizes, starts, dtype = case
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape).copy()  # owns its memory
    upd = -1 - np.arange(int(np.prod(sizes)), dtype=np.float32).reshape(sizes)
    want = x.copy()
    want[_reference_window(shape, sizes, starts)] = upd
    original = x.copy()
    got = _handler("dynamic-update-slice", shape, sizes, dtype, 0 if in_place else -1)(
        x, upd, *[np.dtype(dtype).type(s) for s in starts])
    np.testing.assert_array_equal(got, want)
    if in_place:
        assert got is x  # an owned, writeable buffer is updated where it is
    else:
        np.testing.assert_array_equal(x, original)  # without `reuse`, never


def _read_only(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v


@pytest.mark.parametrize("make", [lambda a: a[1:], _read_only, lambda a: np.frombuffer(bytearray(a.tobytes()), a.dtype)],
                         ids=["view", "read-only", "foreign memory"])
def test_an_in_place_update_copies_a_buffer_it_does_not_own(make: Any) -> None:
    """A view, a read-only array or foreign memory is copied even where the compiler allows
    writing in place (the loop state is re-owned only where the loop can not prove it owns it)."""
    base = np.arange(6, dtype=np.float32)
    x = make(base)
    before = np.array(x)
    got = _handler("dynamic-update-slice", x.shape, (1,), "int32", 0)(x, np.array([9], np.float32), np.int32(0))
    assert got is not x and got[0] == 9
    np.testing.assert_array_equal(x, before)
    np.testing.assert_array_equal(base, np.arange(6, dtype=np.float32))


def test_a_window_larger_than_its_operand_is_refused_when_loaded() -> None:
    with pytest.raises(ValueError, match="does not fit"):
        _handler("dynamic-slice", (3, 4), (4, 4), "int32")
