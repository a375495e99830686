"""What a GpSimd worker may use and touch: resource limits, a scrubbed environment and a seccomp
filter (issue 16).

The worker runs user code (a custom-op library, possibly from an artifact someone else made), so
it gets the least it needs: no core dumps, a bounded address space, bounded file writes, a CPU
time budget re-armed per request (the worker is persistent, so a lifetime limit would end a long
training run), an environment holding nothing of the host's but what Python needs, and its own
process group (the host kills the group, so children a kernel forked die with it). A worker
whose host is gone sees its request pipe close and exits after the request it is running (the
CPU budget bounds that one); PR_SET_PDEATHSIG is not used, since it fires when the host *thread*
that started the worker ends, which may be any short-lived thread. The seccomp filter
(seccomp.py) keeps signals and process-reaching calls inside the worker's own group.

The settings are parsed by emulator.limits, like the emulator's other limits.
"""

from __future__ import annotations

import os
import resource

from emulator.gpsimd import seccomp
from emulator.limits import LimitSettingError, positive_setting

#: Address space of a worker, in bytes [16 GiB; at least `MIN_MEMORY`]: kernels' data lives in
#: the host's shared files, which the worker maps, plus the 8 cores' stacks and the runtime's heaps.
MEMORY_ENV = "NEURON_CUSTOMCALL_GPSIMD_MEMORY"
DEFAULT_MEMORY = 16 << 30
MIN_MEMORY = 256 << 20
#: Largest file a worker may write (its captured standard output is one) [1 GiB].
FILE_SIZE = 1 << 30
#: Variables the worker keeps from the host's environment (the runtime's printf setting, the
#: seccomp switch, the choice of the prepared calls' loop (worker.LOOP_ENV) and what a C++ runtime may consult); everything else (tokens, keys, paths) is
#: left out.
KEPT = ("NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES", seccomp.ENV, "NEURON_CUSTOMCALL_GPSIMD_LOOP", "LANG", "LC_ALL",
        "TZ")


def memory_limit() -> int:
    """The worker's address-space limit from NEURON_CUSTOMCALL_GPSIMD_MEMORY (bytes);
    LimitSettingError if it is not a whole number of at least `MIN_MEMORY`."""
    memory = int(positive_setting(MEMORY_ENV, DEFAULT_MEMORY, int))
    if memory < MIN_MEMORY:
        raise LimitSettingError(f"{MEMORY_ENV}={memory}: the least is {MIN_MEMORY} (256 MiB)")
    return memory


def environment(project_root: str) -> dict[str, str]:
    """The worker's whole environment: a fixed PATH, the project on PYTHONPATH, and `KEPT`."""
    env = {"PATH": os.defpath, "PYTHONPATH": project_root, "PYTHONNOUSERSITE": "1"}
    env.update({name: os.environ[name] for name in KEPT if name in os.environ})
    return env


def apply(memory: int) -> str | None:
    """In the worker, before the library is loaded: the limits above and the seccomp filter.
    Returns None when the filter is on, else why it is not (the host logs that)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE, FILE_SIZE))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    return seccomp.install()


def arm_cpu(seconds: float) -> None:
    """Lets the worker use `seconds` more CPU time (all its threads together) from now; past it
    the kernel gets SIGXCPU, which ends the worker (the host reports the signal)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(usage.ru_utime + usage.ru_stime + seconds) + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
