"""Property: an affine access as a strided view equals the same access as a gather."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from emulator.kernel_exec.access import Context, Storage, plan_access
from emulator.kernel_ir import Access, Affine


@st.composite
def accesses(draw):
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 9)) for _ in range(rank))
    tile = tuple(draw(st.integers(1, 4)) for _ in range(draw(st.integers(1, 2))))
    grid = (draw(st.integers(1, 3)),)
    index = []
    for n in shape:
        terms = {f"t{j}": draw(st.integers(-2, 2)) for j in range(len(tile))}
        terms["p0"] = draw(st.integers(-2, 2))
        index.append(Affine.make(draw(st.integers(0, n - 1)), terms))
    dtype = draw(st.sampled_from(["float32", "bfloat16", "float8_e5m2", "int16"]))
    return shape, Access("x", tile, tuple(index)), grid, dtype


@settings(max_examples=200, deadline=None)
@given(accesses())
def test_strided_view_equals_gather(case):
    from emulator.kernel_ir import dtypes

    shape, access, grid, dtype = case
    arr = (np.arange(int(np.prod(shape))) % 100).astype(dtypes.to_numpy(dtype)).reshape(shape)
    ctx = Context(("p0",), grid, {}, {"p0": grid[0]})
    plan = plan_access(Storage(arr, ()), access, ctx)
    idx = plan.index_arrays()
    inside = all(((ix >= 0) & (ix < n)).all() for ix, n in zip(idx, shape))
    assert plan.in_bounds(shape) == inside
    if inside:
        np.testing.assert_array_equal(plan.view(arr), arr[tuple(idx)])
        # also through a non-contiguous parent (the as_strided path)
        big = np.zeros(tuple(2 * n for n in shape), arr.dtype)
        sub = big[tuple(slice(None, None, 2) for _ in shape)]
        sub[...] = arr
        np.testing.assert_array_equal(plan.view(sub), arr[tuple(idx)])


def test_lower_rank_tile_aligns_at_the_partition_axis():
    """NKI's rule, not NumPy's: a [P] tile read against [P, F] is [P, 1] broadcast along the
    free axis (NumPy would align it with the last axis, which P == F makes look plausible)."""
    import pytest

    arr = np.arange(4, dtype=np.float32)
    ctx = Context(("p0",), (2,), {}, {"p0": 2})
    col = Access("x", (4,), (Affine.make(0, {"t0": 1}),))
    got = plan_access(Storage(arr, ()), col, ctx, (4, 4)).view(arr)
    np.testing.assert_array_equal(got, np.broadcast_to(arr[None, :, None], (2, 4, 4)))
    # a [P, 1] value read as a [P] tile: the trailing extent-1 axis is dropped
    arr2 = arr.reshape(4, 1)
    p1 = Access("x", (4, 1), (Affine.make(0, {"t0": 1}), Affine.make(0, {"t1": 1})))
    got = plan_access(Storage(arr2, ()), p1, ctx, (4,)).view(arr2)
    np.testing.assert_array_equal(got, np.broadcast_to(arr, (2, 4)))
    with pytest.raises(ValueError, match="partition axis"):
        plan_access(Storage(arr, ()), col, ctx, (3, 4))
