"""Counter-based RNGs of rng-bit-generator (emulator/ops/rng.py): known answers."""
from __future__ import annotations

import numpy as np

from emulator.ops.rng import philox4x32, threefry2x32


def test_threefry_known_answer():
    # Random123's known-answer vector for threefry2x32_20 (key 0, counter 0)
    a, b = threefry2x32(np.array([0], np.uint32), np.array([0], np.uint32), np.uint32(0), np.uint32(0))
    assert (int(a[0]), int(b[0])) == (0x6B200159, 0x99BA4EFE)


def test_philox_known_answer():
    # Random123's known-answer vector for philox4x32_10 (counter 0, key 0)
    z = np.array([0], np.uint32)
    out = philox4x32([z, z, z, z], np.uint32(0), np.uint32(0))
    assert [int(v[0]) for v in out] == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
