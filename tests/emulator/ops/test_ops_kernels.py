"""Emulator handlers and helpers on their own (no compiler): sorting network, tree reduction,
scatter rounds, total order, float->int saturation, reduce-precision, counter-based RNGs."""
from __future__ import annotations

import ml_dtypes
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from emulator.ops.convert import float_to_int, reduce_precision
from emulator.ops.elementwise import total_order_key
from emulator.ops.indexing import apply_in_rounds
from emulator.ops.reduce import tree_reduce
from emulator.ops.rng import philox4x32, threefry2x32
from emulator.ops.sort import _bitonic_argsort


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.int32, st.tuples(st.integers(1, 3), st.integers(1, 40)), elements=st.integers(-5, 5)))
def test_bitonic_network_is_a_stable_sort(x):
    perm = _bitonic_argsort([x], lambda a, b: a[0] < b[0])
    np.testing.assert_array_equal(perm, np.argsort(x, axis=-1, kind="stable"))


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


def test_total_order_key_orders_nans_and_zeros():
    x = np.array([np.nan, 1.0, -0.0, -np.inf, 0.0, -np.nan, np.inf, -1.0], np.float32)
    x[5] = -np.abs(x[5])
    order = np.argsort(total_order_key(x), kind="stable")
    got = x[order]
    assert np.signbit(got[0]) and np.isnan(got[0])
    np.testing.assert_array_equal(got[1:7], [-np.inf, -1.0, -0.0, 0.0, 1.0, np.inf])
    assert np.signbit(got[3]) and not np.signbit(got[4])
    assert np.isnan(got[7]) and not np.signbit(got[7])


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


def test_threefry_known_answer():
    # Random123's known-answer vector for threefry2x32_20 (key 0, counter 0)
    a, b = threefry2x32(np.array([0], np.uint32), np.array([0], np.uint32), np.uint32(0), np.uint32(0))
    assert (int(a[0]), int(b[0])) == (0x6B200159, 0x99BA4EFE)


def test_philox_known_answer():
    # Random123's known-answer vector for philox4x32_10 (counter 0, key 0)
    z = np.array([0], np.uint32)
    out = philox4x32([z, z, z, z], np.uint32(0), np.uint32(0))
    assert [int(v[0]) for v in out] == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
