"""What benchmarks/gpsimd_call.py measures a GpSimd call with, in its own process and in the
process that runs the main job's compiled graph (benchmarks/_gpsimd_graph.py): the in-process floor
(the same request handled in the calling process), a process's CPU time, who waited how.

Why a floor: what isolating a user's kernel in its worker process costs is the difference between
a call and this floor, measured side by side. Benchmark only: the project never loads a user's
library into the host.
"""
from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from emulator.gpsimd import abi, args as gargs, control
from emulator.gpsimd.call import NUMPY_DTYPES
from emulator.gpsimd.descriptor import OpDescriptor
from emulator.gpsimd.runner import GpSimdRunner


def task_cpu_ns(pid: int) -> int:
    """CPU nanoseconds of all threads of `pid` (schedstat's first field)."""
    total = 0
    base = f"/proc/{pid}/task"
    for tid in os.listdir(base):
        try:
            with open(f"{base}/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


class InProcess:
    """One op's request handled here: the library loaded with ctypes, the kernel called through
    ncc_gpsimd_run on prepared ncc_args (tensor arguments only, as the main job's ReLU has),
    inputs copied in and the output copied out, as a prepared call's worker and host do."""

    def __init__(self, path: Path | str, op: OpDescriptor, inputs: Sequence[gargs.TensorSpec],
                 out: gargs.TensorSpec) -> None:
        self.lib = ctypes.CDLL(str(path), mode=os.RTLD_LOCAL | os.RTLD_NOW)
        abi.bind(self.lib)
        self.index = op.index
        self.function = ctypes.cast(self.lib[op.symbol], ctypes.c_void_p).value
        self.inputs = [np.zeros(s.shape, NUMPY_DTYPES[s.dtype]) for s in inputs]
        self.output = np.zeros(out.shape, NUMPY_DTYPES[out.dtype])
        self.array = (abi.NccArg * len(inputs))()
        for arg, spec, buf in zip(self.array, inputs, self.inputs):
            gargs.fill(arg, gargs.tensor_fields(spec), buf.ctypes.data)
        self.dst = abi.NccArg()
        gargs.fill(self.dst, gargs.tensor_fields(out), self.output.ctypes.data)
        self.counters = abi.NccCounters()
        self.text = ctypes.create_string_buffer(abi.TEXT_CAPACITY)
        self.text_len = ctypes.c_size_t(0)
        self.err = ctypes.create_string_buffer(abi.ERROR_CAPACITY)
        self.ninputs = len(inputs)

    def __call__(self, *arrays: np.ndarray) -> np.ndarray:
        for buf, a in zip(self.inputs, arrays):
            np.copyto(buf, a)
        code = self.lib.ncc_gpsimd_run(self.index, self.function, self.array, self.ninputs, ctypes.byref(self.dst),
                                       1, ctypes.byref(self.counters), self.text, len(self.text),
                                       ctypes.byref(self.text_len), self.err, len(self.err))
        if code != 0:
            raise RuntimeError(self.err.value.decode())
        return self.output.copy()


#: Who waited how (`waits`): the host's sleeps and the sleeping workers it woke
#: (control.HostWaits), the worker's sleeps, the calls its poll found (control page words
#: 13-14), its sleeps timed to end before the expected call and its polls begun on the host's
#: CPU, which it moved off (words 27-28), the calls after which it followed no plan because the
#: gap's plans had been missing (word 30), the calls a graph run's prime had it poll for and find
#: (word 31), its polls stopped as preempted (word 15), the host's polls stopped as preempted,
#: and the stalls of each side's CPU polled through (control.Spinner: a gap without a context
#: switch).
WAITS = ("host slept", "woke worker", "worker slept", "worker polled", "worker timed", "worker on host's CPU",
         "worker unplanned", "worker primed", "worker preempted", "host preempted", "worker stalls", "host stalls")
SHARES = 8  # the first SHARES of WAITS are printed as shares of the calls


def waits(runner: GpSimdRunner) -> tuple[int, ...]:
    """The counts of `WAITS` so far for the runner's worker."""
    worker = runner._worker
    assert worker is not None
    words = worker.control.words
    return (worker.waits.slept, worker.waits.woke, words[control.WORKER_SLEPT], words[control.WORKER_POLLED],
            words[control.WORKER_TIMED], words[control.WORKER_SHARED], words[control.WORKER_UNPLANNED],
            words[control.WORKER_PRIMED], words[control.WORKER_PREEMPTED],
            worker._spinner.preempted, words[control.WORKER_STALLS], worker._spinner.stalls)
