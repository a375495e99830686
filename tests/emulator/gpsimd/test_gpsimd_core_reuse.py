"""Emulated cores are kept across runs (core 0 on the worker's calling thread, the others on
threads that wait between runs, each on a painted stack of its own): every run must still start
on a fresh core (empty and zeroed TCM pool, zero counters, empty printf buffer, default coherence
policy, a repainted stack), and every error path must stay what it was."""

from __future__ import annotations

import numpy as np
import pytest

from emulator.gpsimd import KernelCrash, KernelError
from gpsimd_kernels import run, tensor

X = np.arange(16, dtype=np.float32)
RUNS = 50


@pytest.mark.parametrize("multicore", [False, True])
def test_each_run_starts_on_a_fresh_core(multicore: bool) -> None:
    cores = 8 if multicore else 1
    for _ in range(RUNS):
        result = run("reuse_ops", "dirty_core", tensor(X), multicore=multicore)
        slots = result.output.view(np.int32)[: 2 * cores].reshape(cores, 2)
        assert slots[:, 0].tolist() == [0] * cores  # the TCM block reads as zeros
        assert slots[:, 1].tolist() == list(range(cores))
        # The blocks left allocated by the previous run are gone: the peak is this run's alone.
        assert result.counters["tcm_peak_bytes"] == 4096 + 16
        assert result.counters["tcm_bytes"] == 8 * cores
        assert result.text == "core 0 ran\n"
        assert result.counters["printf_lost_bytes"] == 0


def test_the_coherence_policy_a_run_set_does_not_outlive_it() -> None:
    for _ in range(3):
        run("reuse_ops", "dirty_core", tensor(X))  # sets INCOHERENT_QUIET
        with pytest.raises(KernelError) as info:
            run("reuse_ops", "mixed_accessors", tensor(X))
        assert info.value.kind == "coherence"


def stack_bytes(nbytes: int, core: int = -1, multicore: bool = False) -> int:
    return run("reuse_ops", "use_stack", tensor(X), nbytes, core, multicore=multicore).counters["stack_bytes"]


@pytest.mark.parametrize("multicore, core", [(False, -1), (True, 5)])
def test_stack_overflow_after_many_good_runs_is_reported(multicore: bool, core: int) -> None:
    small = [stack_bytes(1024, core, multicore) for _ in range(RUNS)]
    assert len(set(small)) == 1 and 1024 < small[0] < 8192
    assert stack_bytes(16 * 1024, core, multicore) > 16 * 1024
    with pytest.raises(KernelError, match="stack overflow: the kernel used .* undeclared limit of 8192") as info:
        stack_bytes(40 * 1024, core, multicore)
    assert info.value.kind == "usage"
    # The stack was painted again: the next small run measures what it did before.
    assert stack_bytes(1024, core, multicore) == small[0]
    assert stack_bytes(64, core, multicore) < small[0]


def test_a_crash_after_many_good_runs_still_raises_and_the_next_run_works() -> None:
    for _ in range(RUNS):
        run("error_ops", "tcm_exhaust", tensor(X))
    with pytest.raises(KernelCrash, match="op 'segfault' crashed .*SIGSEGV"):
        run("error_ops", "segfault", tensor(X))
    assert run("error_ops", "tcm_exhaust", tensor(X)).output.view(np.int32).tolist() == [16, 1]


def test_overrunning_even_the_slack_hits_the_guard_page_after_good_runs() -> None:
    for _ in range(10):
        stack_bytes(1024)
    with pytest.raises(KernelCrash, match="op 'use_stack' crashed .*SIGSEGV"):
        stack_bytes(400 * 1024)
    assert stack_bytes(1024) < 8192


def test_a_multicore_run_works_after_a_crash_killed_its_core_threads() -> None:
    run("reuse_ops", "dirty_core", tensor(X), multicore=True)
    with pytest.raises(KernelCrash):
        stack_bytes(400 * 1024, 3, multicore=True)
    result = run("reuse_ops", "dirty_core", tensor(X), multicore=True)
    assert result.output.view(np.int32)[1::2].tolist() == list(range(8))


def _overflow_bytes(nbytes: int, core: int, multicore: bool) -> int:
    """The stack a run of `nbytes` past the limit used, from its overflow error."""
    import re

    with pytest.raises(KernelError, match="stack overflow") as info:
        stack_bytes(nbytes, core, multicore)
    return int(re.search(r"the kernel used (\d+) bytes", str(info.value)).group(1))


@pytest.mark.parametrize("multicore, core", [(False, -1), (True, 5)])
def test_the_write_protected_slack_measures_each_overflow_as_a_full_scan_would(multicore: bool, core: int) -> None:
    # Between runs the slack below the limit is write-protected and read back only from the
    # lowest page a run wrote (runtime: PaintedStack): every depth, on either side of a page
    # boundary, after deeper and shallower runs, measures what it wrote.
    measured = {}
    for nbytes in (30 * 1024, 70 * 1024 + 100, 30 * 1024, 100 * 1024 - 8, 4096 * 17, 30 * 1024):
        used = _overflow_bytes(nbytes, core, multicore)
        assert nbytes < used < nbytes + 4096, (nbytes, used)
        assert measured.setdefault(nbytes, used) == used
    assert stack_bytes(1024, core, multicore) < 8192  # repainted and protected again


def test_a_rounding_mode_a_kernel_sets_does_not_outlive_its_run() -> None:
    # The switch to a core's stack and back keeps what the ABI has a function preserve (MXCSR
    # and the x87 control word among it), as swapcontext did.
    x = np.array([1, 2, 4, 5, 7, 11], np.float32)
    nearest = x / np.float32(3)
    for _ in range(3):
        assert np.array_equal(run("reuse_ops", "divide_by_three", tensor(x), 0).output.view(np.float32), nearest)
        up = run("reuse_ops", "divide_by_three", tensor(x), 1).output.view(np.float32)
        assert np.all(up >= nearest) and not np.array_equal(up, nearest)  # 5 / 3 rounds differently
