"""What a GpSimd worker may use: resource limits and a scrubbed environment (issue 16).

The worker runs user code (a custom-op library, possibly from an artifact someone else made), so
it gets the least it needs: no core dumps, a bounded address space, bounded file writes, a CPU
time budget re-armed per request (the worker is persistent, so a lifetime limit would end a long
training run), an environment holding nothing of the host's but what Python needs, and its own
process group (the host kills the group, so children a kernel forked die with it). A worker
whose host is gone sees its request pipe close and exits after the request it is running (the
CPU budget bounds that one); PR_SET_PDEATHSIG is not used, since it fires when the host *thread*
that started the worker ends, which may be any short-lived thread. What is not done: a seccomp
filter (a kernel can still make system calls, such as kill(2) of the host's pid); docs/gpsimd.md
says so.
"""

from __future__ import annotations

import os
import resource

#: Address space of a worker, in bytes [16 GiB]: kernels' data lives in the host's shared files,
#: which the worker maps, plus the 8 cores' stacks and the runtime's heaps.
MEMORY_ENV = "NEURON_CUSTOMCALL_GPSIMD_MEMORY"
DEFAULT_MEMORY = 16 << 30
#: Largest file a worker may write (its captured standard output is one) [1 GiB].
FILE_SIZE = 1 << 30
#: Variables the worker keeps from the host's environment (the runtime's printf setting and what
#: a C++ runtime may consult); everything else (tokens, keys, paths) is left out.
KEPT = ("NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES", "LANG", "LC_ALL", "TZ")


class LimitError(ValueError):
    """A limit setting is not a positive number of bytes."""


def memory_limit() -> int:
    """The worker's address-space limit from NEURON_CUSTOMCALL_GPSIMD_MEMORY (bytes)."""
    text = os.environ.get(MEMORY_ENV, "").strip()
    if not text:
        return DEFAULT_MEMORY
    if not text.isdigit() or int(text) < (256 << 20):
        raise LimitError(f"{MEMORY_ENV}={text!r}: must be a number of bytes, at least 268435456 (256 MiB)")
    return int(text)


def environment(project_root: str) -> dict[str, str]:
    """The worker's whole environment: a fixed PATH, the project on PYTHONPATH, and `KEPT`."""
    env = {"PATH": os.defpath, "PYTHONPATH": project_root, "PYTHONNOUSERSITE": "1"}
    env.update({name: os.environ[name] for name in KEPT if name in os.environ})
    return env


def apply(memory: int) -> None:
    """In the worker, before the library is loaded: the limits above."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE, FILE_SIZE))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))


def arm_cpu(seconds: float) -> None:
    """Lets the worker use `seconds` more CPU time (all its threads together) from now; past it
    the kernel gets SIGXCPU, which ends the worker (the host reports the signal)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(usage.ru_utime + usage.ru_stime + seconds) + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
