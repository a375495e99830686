"""Reductions of lifted computations (emulator/ops/reduce.py): the pairwise tree."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from emulator.ops.reduce import tree_reduce


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.int64, st.tuples(st.integers(1, 4), st.integers(0, 33)), elements=st.integers(-1000, 1000)))
def test_tree_reduce_matches_numpy(x):
    (s,) = tree_reduce(lambda a, b: [a + b], [x], [np.int64(7)])
    np.testing.assert_array_equal(s, x.sum(-1) + 7)


def test_tree_reduce_variadic_argmax_keeps_first_index():
    x = np.array([[1, 5, 5, 2, 5], [0, 0, 0, 0, 0]], np.int32)
    idx = np.broadcast_to(np.arange(5), x.shape)

    def amax(a, i, b, j):
        take_a = (a > b) | ((a == b) & (i < j))
        return [np.where(take_a, a, b), np.where(take_a, i, j)]

    v, i = tree_reduce(amax, [x, idx], [np.int32(-1), np.int32(-1)])
    np.testing.assert_array_equal(v, [5, 0])
    np.testing.assert_array_equal(i, [1, 0])
