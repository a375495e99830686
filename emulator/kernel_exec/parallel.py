"""The SPMD grid on several host threads: programs along grid axis 0 split into contiguous ranges.

Why: a vectorised kernel spends its time inside NumPy calls, and NumPy releases the GIL in its
loops, so a second host core halves the time of compute-bound kernels (a row softmax over
4096x1024 takes 6.9 ms on one thread and 3.5 ms on two here). Programs of one launch are
independent on hardware, so running ranges of them at once is faithful, provided the emulator
stays deterministic:

* every write to a tensor the programs share (inputs, outputs, shared HBM) must be *disjoint
  along axis 0*: two programs with different ``program_id(0)`` never touch a common element, so
  each element is produced by one thread, with the same arithmetic as on one thread;
* the grid must already run vectorised (vectorise.py), which rules out programs reading what
  others write.

(``random`` values are a pure function of program, iteration and element, see handlers/vector.py,
so they do not depend on the split either.)

Results are bit-identical to a one-thread run. Small launches stay on one thread: below
``MIN_PARALLEL_BYTES`` of tiles the hand-off costs more than it saves (a 256x1024 add: 103 us on
one thread, 132 us on two). An error is reported as on one thread: the other ranges stop, and
the launch runs again on one thread to raise exactly the error a sequential run gives.

Control: ``NEURON_EMULATOR_THREADS`` = ``auto`` (default: the CPUs this process may use that
other processes are not busy on, see emulator/host.py) | a number.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from typing import TYPE_CHECKING

import numpy as np

from emulator import blas, fpenv
from emulator.host import free_cpus
from emulator.kernel_ir import KernelIR, walk_instructions
from emulator.kernel_ir.ir import program_symbol

from .vectorise import iteration_disjoint, shared_writes

if TYPE_CHECKING:
    from .program import Program
    from .runner import Runner

log = logging.getLogger(__name__)

#: Instructions that exchange data with other NeuronCores: a kernel holding one runs on the
#: thread of its core (the one whose DeviceContext names it), in the same order on every core,
#: and the two cores of an LNC=2 launch run in lockstep (lnc.py).
EXCHANGES = frozenset({"collective", "rank_id", "core_barrier", "sendrecv"})

#: Tiles (bytes, over the whole grid) below which a launch stays on one host thread.
MIN_PARALLEL_BYTES = 8 << 20

_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()


def _forget_pool_in_child() -> None:
    """A forked child has none of the parent's threads: a pool inherited from the parent would
    queue work that nothing runs (a hang), and a lock held by a parent thread would never be
    released. The child starts afresh."""
    global _pool, _pool_size, _pool_lock
    _pool, _pool_size, _pool_lock = None, 0, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_in_child)


def parallel_reason(kernel: KernelIR, grid_reason: str | None) -> str | None:
    """None if ranges of grid axis 0 may run on different host threads (module docstring), else
    why not."""
    grid = tuple(kernel.grid)
    if not grid or grid[0] < 2:
        return "grid axis 0 has one program"
    if grid_reason is not None:
        return "the grid does not run vectorised"
    exchange = next((i for i in walk_instructions(kernel.body) if i.op in EXCHANGES), None)
    if exchange is not None:  # every core must exchange in the same order (kernel_exec/collective.py)
        return f"{exchange.op} at {exchange.loc} exchanges data with other NeuronCores"
    p0 = program_symbol(0)
    for ins, ext in shared_writes(kernel):
        if "indirect" in ins.attrs or not iteration_disjoint(ins.dst, {p0}, ext):
            return (f"{ins.op} at {ins.loc} writes {ins.dst.tensor!r} where programs with "
                    "different program_id(0) may meet")
    return None


def threads_wanted() -> int:
    """How many host threads a launch may use (``NEURON_EMULATOR_THREADS``)."""
    mode = os.environ.get("NEURON_EMULATOR_THREADS", "auto").strip().lower()
    if mode != "auto":
        try:
            return max(1, int(mode))
        except ValueError:
            log.warning("NEURON_EMULATOR_THREADS=%r is neither auto nor a number; using auto", mode)
    return free_cpus()


def threads_for(program: Program) -> int:
    """Host threads for one launch of ``program``: 1 unless it may split and is big enough."""
    if program.parallel_reason is not None:
        return 1
    grid = program.kernel.grid
    if program.program_bytes * math.prod(grid) < MIN_PARALLEL_BYTES:
        return 1
    return min(threads_wanted(), grid[0])


def _executor(workers: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size < workers:  # grows when asked for more
            if _pool is not None:
                _pool.shutdown(wait=False)  # its queued work still runs
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nki-emulator")
            _pool_size = workers
        return _pool


class Cancelled(Exception):
    """A range stopped because another range failed (never seen outside this module)."""


def run_split(runner: Runner, threads: int) -> None:
    """Run the grid of ``runner`` (already vectorised) as ``threads`` ranges of axis 0, the first
    on the calling thread. When a range fails the others stop at their next statement and the
    first failure in program order is raised; the caller re-runs on one thread for the error a
    sequential run gives (its bounds describe the whole grid, not one range)."""
    n = runner.kernel.grid[0]
    edges = [round(i * n / threads) for i in range(threads + 1)]
    ranges = [(a, b) for a, b in zip(edges, edges[1:]) if b > a]
    stop = threading.Event()
    workers = [runner.worker(stop) for _ in ranges]
    log.debug("kernel %r: grid %s runs on %d host threads, programs %s along axis 0",
              runner.kernel.name, list(runner.kernel.grid), len(ranges), ranges)

    flush = fpenv.active()  # inside a graph run: the host threads flush subnormals as it does

    def job(i: int) -> None:
        try:
            with np.errstate(all="ignore"), (fpenv.flushed_denormals() if flush and i else nullcontext()):
                workers[i].run_grid_range(*ranges[i], share=len(ranges))
        except BaseException:
            stop.set()
            raise

    with blas.blas_threads(1 if runner.program.has_matmul else None):
        pool = _executor(len(ranges) - 1)
        futures: list[Future] = [pool.submit(job, i) for i in range(1, len(ranges))]
        outcomes: list[BaseException | None] = []
        try:
            job(0)
            outcomes.append(None)
        except BaseException as e:  # noqa: BLE001 - re-raised below, in program order
            outcomes.append(e)
        for f in futures:
            outcomes.append(f.exception())
    for e in outcomes:
        if e is not None and not isinstance(e, Cancelled):
            raise e
