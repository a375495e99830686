"""BLAS threading for a run: only as many threads as there are free cores.

Why: NumPy's OpenBLAS spins its worker threads while it waits for them; when other processes
already keep a core busy, a GEMM split over every core waits for a descheduled thread and runs
several times slower than on fewer threads (measured here: 64x4096 @ 4096x2048 takes 23 ms on one
thread and 58-116 ms on two under a load average of 7 on 2 cores; unloaded, two threads win).
So for the duration of `Executable.run` the emulator asks OpenBLAS for as many threads as
`emulator.host.free_cpus` reports (the cores other processes did not use over the last second
or so) and restores the previous setting afterwards; with every core free it leaves BLAS alone.

Control: NEURON_EMULATOR_BLAS_THREADS = "auto" (default) | a number (always that many) | "off"
(never touch BLAS). The libraries are found and driven through threadpoolctl; without an
OpenBLAS (other BLAS, other platforms) this is a no-op.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from emulator.host import free_cpus, usable_cpus

log = logging.getLogger(__name__)

_libs: list[Any] | None = None  # threadpoolctl controllers of the loaded OpenBLAS libraries


def _openblas() -> list[Any]:
    """threadpoolctl's controllers of every OpenBLAS loaded (NumPy's and SciPy's; both run our
    GEMMs and LAPACK calls), found once. Empty without threadpoolctl or an OpenBLAS."""
    global _libs
    if _libs is None:
        try:
            import numpy  # noqa: F401 - make sure NumPy's BLAS is loaded
            import scipy.linalg  # noqa: F401 - and SciPy's, which the LAPACK ops call
            from threadpoolctl import ThreadpoolController
            _libs = list(ThreadpoolController().select(internal_api="openblas").lib_controllers)
        except Exception as e:  # noqa: BLE001 - any failure means "leave BLAS alone"
            log.debug("no OpenBLAS thread control: %s", e)
            _libs = []
    return _libs


def _wanted() -> int | None:
    mode = os.environ.get("NEURON_EMULATOR_BLAS_THREADS", "auto").strip().lower()
    if mode == "off":
        return None
    if mode != "auto":
        try:
            return max(1, int(mode))
        except ValueError:
            log.warning("NEURON_EMULATOR_BLAS_THREADS=%r is not auto, off or a number; using auto", mode)
    free = free_cpus()
    return None if free >= usable_cpus() else free


@contextmanager
def blas_threads_for_run() -> Iterator[None]:
    """Within the block, OpenBLAS uses the thread count the policy above asks for."""
    with blas_threads(_wanted()):
        yield


@contextmanager
def blas_threads_for_devices(count: int) -> Iterator[None]:
    """Within the block, `count` devices run concurrently, each in its own thread: OpenBLAS gets
    an equal share of the usable cores each (at least one). Why here and not per run: the thread
    count is one setting of the process, so concurrent runs setting and restoring it race (one
    restores two threads while another still runs its GEMMs), and OpenBLAS called from several
    threads at once with its own workers each thrashes (measured here at a load of 13 on 2 cores:
    two threads of 20 GEMMs 128x784 @ 784x1024 took 2.7 s with 2 BLAS threads, 0.24 s with 1).
    The runs inside then find the setting they want already made. NEURON_EMULATOR_BLAS_THREADS
    set to a number or "off" is honoured as for one run."""
    mode = os.environ.get("NEURON_EMULATOR_BLAS_THREADS", "auto").strip().lower()
    share = max(1, usable_cpus() // max(1, count))
    with blas_threads(_wanted() if mode != "auto" else share):
        yield


@contextmanager
def blas_threads(n: int | None) -> Iterator[None]:
    """Within the block, OpenBLAS uses ``n`` threads (None: leave it alone); restored after.
    The NKI executor asks for one while its own host threads each run GEMMs (parallel.py)."""
    libs = _openblas() if n is not None else []
    # each library's own setter, not threadpool_limits(): that snapshots every library's info
    # first (30 us a call against 4 us here), paid on each run of a busy host
    before = [lib.num_threads for lib in libs]
    changed = [(lib, b) for lib, b in zip(libs, before) if b != n]
    for lib, _ in changed:
        lib.set_num_threads(n)
    try:
        yield
    finally:
        for lib, b in changed:
            lib.set_num_threads(b)
