"""Recycled result memory (emulator/collectives/buffers.py): a block is handed out again only
once no array views it, and an all-reduce's result is never overwritten by a later one."""
from __future__ import annotations

import numpy as np

import hlo
from emulator import load_artifact
from emulator.collectives import run_devices
from emulator.collectives.buffers import RESULTS, RecycledBuffers
from neuron_customcall.compiler import compile_module


def test_a_block_returns_only_once_nothing_views_it() -> None:
    pool = RecycledBuffers(min_bytes=64, keep_free=2)
    first = pool.take(100, np.float32)
    address = first.ctypes.data
    view = first.reshape(10, 10)[2:]  # a view of a view: its base is the block too
    del first
    second = pool.take(100, np.float32)
    assert second.ctypes.data != address
    del view
    third = pool.take(50, np.float64)
    assert third.ctypes.data == address and third.dtype == np.float64 and third.shape == (50,)
    assert pool.held_bytes() == 800


def test_free_blocks_beyond_keep_free_are_dropped_and_small_results_are_not_kept() -> None:
    pool = RecycledBuffers(min_bytes=64, keep_free=2)
    for n in range(100, 105):
        pool.take(n, np.float32)  # each is dropped at once: a free block of another size
    assert pool.held_bytes() == 4 * 103 + 4 * 104
    small = pool.take(10, np.float32)
    assert small.base is None and pool.held_bytes() == 4 * 103 + 4 * 104


BIG = """HloModule big_ar, replica_count=2
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
ENTRY e {
  x = f32[8388608] parameter(0)
  ROOT s = f32[8388608] all-reduce(x), replica_groups={{0,1}}, to_apply=add
}"""


def test_an_all_reduce_result_kept_by_the_caller_is_not_reused() -> None:
    """32 MB per device (the recycled size): the second run's results are new while the first's
    are held, and equal NumPy's sum; the first's stay as they were."""
    exe = load_artifact(compile_module(hlo.load(BIG)))
    rng = np.random.default_rng(0)
    a = [[rng.standard_normal(8388608).astype(np.float32)] for _ in range(2)]
    b = [[rng.standard_normal(8388608).astype(np.float32)] for _ in range(2)]
    first = run_devices(exe, a, 2, 1, timeout_s=60)
    second = run_devices(exe, b, 2, 1, timeout_s=60)
    for d in range(2):
        np.testing.assert_array_equal(first[d][0], a[0][0] + a[1][0])
        np.testing.assert_array_equal(second[d][0], b[0][0] + b[1][0])
        assert not np.shares_memory(first[d][0], second[d][0])
    held = RESULTS.held_bytes()
    del first
    third = run_devices(exe, a, 2, 1, timeout_s=60)
    assert RESULTS.held_bytes() == held  # the released results' memory again, none new
    for d in range(2):
        np.testing.assert_array_equal(third[d][0], a[0][0] + a[1][0])
        assert not np.shares_memory(third[d][0], second[d][0])
