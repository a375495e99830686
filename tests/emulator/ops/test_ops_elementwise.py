"""Element-wise helpers (emulator/ops/elementwise.py): TOTALORDER comparison keys."""
from __future__ import annotations

import numpy as np

from emulator.ops.elementwise import total_order_key


def test_total_order_key_orders_nans_and_zeros():
    x = np.array([np.nan, 1.0, -0.0, -np.inf, 0.0, -np.nan, np.inf, -1.0], np.float32)
    x[5] = -np.abs(x[5])
    order = np.argsort(total_order_key(x), kind="stable")
    got = x[order]
    assert np.signbit(got[0]) and np.isnan(got[0])
    np.testing.assert_array_equal(got[1:7], [-np.inf, -1.0, -0.0, 0.0, 1.0, np.inf])
    assert np.signbit(got[3]) and not np.signbit(got[4])
    assert np.isnan(got[7]) and not np.signbit(got[7])
