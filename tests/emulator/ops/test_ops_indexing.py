"""Scatter's rounds of duplicate indices (emulator/ops/indexing.py)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from emulator.ops.indexing import apply_in_rounds


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=0, max_size=30))
def test_scatter_rounds_apply_duplicates_in_order(idx):
    idx = np.array(idx, np.int64)
    vals = np.arange(len(idx), dtype=np.float64) + 1
    target = np.ones(6)
    expected = target.copy()
    for i, v in zip(idx, vals):
        expected[i] = expected[i] * 2 + v  # not commutative: order matters
    apply_in_rounds([target], idx, [vals], lambda a, b: [a * 2 + b])
    np.testing.assert_array_equal(target, expected)
