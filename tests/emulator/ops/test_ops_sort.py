"""The sort handlers' sorting network (emulator/ops/sort.py)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from emulator.ops.sort import _bitonic_argsort


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.int32, st.tuples(st.integers(1, 3), st.integers(1, 40)), elements=st.integers(-5, 5)))
def test_bitonic_network_is_a_stable_sort(x):
    perm = _bitonic_argsort([x], lambda a, b: a[0] < b[0])
    np.testing.assert_array_equal(perm, np.argsort(x, axis=-1, kind="stable"))
