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


def test_a_scalar_select_picks_its_operand_and_broadcasts_like_np_where_otherwise():
    """`select` declared on scalars: a NumPy bool predicate over scalar branches picks one (NaN,
    -0 and dtype kept: nothing is computed); inside a lifted computation the same handler sees
    arrays, and a constant predicate with an array branch must broadcast as np.where does."""
    from emulator.ops.elementwise import _scalar_select

    nan, neg_zero = np.float32(np.nan), np.float32(-0.0)
    assert np.isnan(_scalar_select(np.bool_(True), nan, np.float32(1)))
    got = _scalar_select(np.bool_(False), nan, neg_zero)
    assert got.dtype == np.float32 and got == 0 and np.signbit(got)
    assert _scalar_select(np.array(True), np.int8(-128), np.int8(1)) == -128  # a 0-d array predicate
    row = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(_scalar_select(np.bool_(True), np.float32(7), row), np.full(4, 7, np.float32))
    np.testing.assert_array_equal(_scalar_select(np.array([True, False, True, False]), np.float32(7), row),
                                  [7, 1, 7, 3])
