"""Conversions (emulator/ops/convert.py): saturating float->int, reduce-precision."""
from __future__ import annotations

import ml_dtypes
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from emulator.ops.convert import float_to_int, reduce_precision


def test_float_to_int_saturates_and_maps_nan_to_zero():
    x = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, -1.9, 1.9, 2147483520.0], np.float32)
    np.testing.assert_array_equal(float_to_int(x, np.dtype(np.int32)),
                                  [0, 2**31 - 1, -2**31, 2**31 - 1, -2**31, -1, 1, 2147483520])
    np.testing.assert_array_equal(float_to_int(x, np.dtype(np.uint8)), [0, 255, 0, 255, 0, 0, 1, 255])


@settings(max_examples=100, deadline=None)
@given(hnp.arrays(np.float32, 16, elements=st.floats(-1e5, 1e5, width=32, allow_subnormal=False)))
def test_reduce_precision_matches_narrow_float_rounding(x):
    np.testing.assert_array_equal(reduce_precision(x, 8, 7), x.astype(ml_dtypes.bfloat16).astype(np.float32))
    with np.errstate(over="ignore"):
        f16 = x.astype(np.float16).astype(np.float32)
    normal = np.abs(f16) >= 2.0**-14
    np.testing.assert_array_equal(reduce_precision(x, 5, 10)[normal], f16[normal])
