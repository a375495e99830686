"""The executor's counter-based uniform generator (handlers/vector.py): uniform, uncorrelated, and a
function of seed and element number only."""

from __future__ import annotations

import numpy as np

from emulator.kernel_exec.handlers.vector import counter_uniform


def test_values_are_uniform_in_0_1_and_float32():
    u = counter_uniform(7, np.arange(1 << 20, dtype=np.uint64))
    assert u.dtype == np.float32 and u.min() >= 0.0 and u.max() < 1.0
    counts, _ = np.histogram(u, bins=64, range=(0.0, 1.0))
    expected = u.size / 64
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 120  # 63 degrees of freedom: the 99.99th percentile is about 115
    assert abs(float(np.corrcoef(u[:-1], u[1:])[0, 1])) < 0.01  # neighbours uncorrelated


def test_each_element_is_a_function_of_seed_and_number():
    ident = np.arange(1000, dtype=np.uint64)
    whole = counter_uniform(3, ident)
    np.testing.assert_array_equal(counter_uniform(3, ident[500:]), whole[500:])
    np.testing.assert_array_equal(counter_uniform(3, ident[::-1]), whole[::-1])
    other = counter_uniform(4, ident)
    assert np.mean(other == whole) < 0.01
