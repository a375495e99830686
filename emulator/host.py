"""What the host machine offers the emulator: usable CPUs, and how many of them are free now.

Why one module: two policies depend on the same reading. OpenBLAS threading (blas.py) and the
NKI executor's host threads (kernel_exec/parallel.py) help only on cores nobody else is using.
When another process keeps a core busy, a GEMM split over both cores of a 2-core host waits for
its descheduled thread and runs 2-4x slower than on one thread (measured here: 64x4096 @
4096x2048 with one busy loop beside it, 31-65 ms on two threads against 10-22 ms on one).

How "now" is measured. The 1-minute load average lags: right after a test run it still reads 4
on a quiet machine, and it counts this process's own threads. So the reading is the CPU time
*other* processes used since the previous reading: the machine's busy time (psutil.cpu_times) minus
this process's own (``os.times``) and its helper processes' (the GpSimd workers, registered with
`count_as_own`). That window is at least READING_SECONDS long (readings are cached) and is
trusted only while it is at most WINDOW_SECONDS old; after an idle gap, the first reading counts
the tasks of other processes running at that instant instead (the machine's runnable tasks minus
this process's running threads).

The counters come from psutil (machine and process CPU times, the workers' states). Two
readings psutil does not offer cheaply come from /proc: the machine's count of runnable tasks
(the fourth field of /proc/loadavg) and this process's threads' states; without them (or
without psutil) the load average is the fallback.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

try:
    import psutil
except ImportError:  # a dependency; without it, the load average decides
    psutil = None  # type: ignore[assignment]

#: How long a reading is reused. Taking one costs about 40 us (psutil's CPU times).
READING_SECONDS = 1.0
#: A CPU-time window older than this says little about now; an instantaneous count is used instead.
WINDOW_SECONDS = 10.0
#: Cores' worth of other processes' work that is ignored (daemons, the kernel's own threads).
BACKGROUND_CORES = 0.3

_clock = time.monotonic


@dataclass(frozen=True)
class _Counters:
    """Cumulative CPU seconds at one instant: the whole machine's busy time and our own."""
    when: float
    machine_busy: float
    own: float


@dataclass(frozen=True)
class _Reading:
    when: float
    usable: int
    free: int


_reading: _Reading | None = None
_counters: _Counters | None = None
_own_pids: dict[int, float] = {}  # helper process -> its CPU seconds when last read
_retired_seconds = 0.0  # CPU seconds of helper processes no longer counted


def count_as_own(pid: int, own: bool = True) -> None:
    """Counts a helper process's CPU time as this process's (own=False stops counting it).

    The GpSimd workers run the user's kernels for us: their work must not look like another
    process competing for the cores. A helper's time stays in our total after it stops being
    counted (or exits), so the total never falls and a window never shows negative own work."""
    global _retired_seconds
    if own:
        _own_pids.setdefault(pid, 0.0)
    elif pid in _own_pids:
        _retired_seconds += max(_own_pids.pop(pid), _process_seconds(pid) or 0.0)
        _procs.pop(pid, None)


def _machine_busy_seconds() -> float | None:
    if psutil is None:
        return None
    try:
        t = psutil.cpu_times()
    except (OSError, RuntimeError):
        return None
    # everything but idle and iowait is busy (guest time is already inside user time)
    return sum(t[:8]) - t.idle - getattr(t, "iowait", 0.0) if len(t) >= 8 else sum(t) - t.idle


def _process_seconds(pid: int) -> float | None:
    """User plus system CPU seconds of process ``pid`` (all its threads); None when it is gone."""
    if psutil is None:
        return None
    proc = _helper(pid)
    try:
        t = proc.cpu_times() if proc is not None else None
    except (psutil.Error, OSError):
        _procs.pop(pid, None)
        return None
    return None if t is None else t.user + t.system


def _own_seconds() -> float:
    t = os.times()
    helpers = 0.0
    for pid, last in tuple(_own_pids.items()):
        now = _process_seconds(pid)
        if now is not None and now >= last:
            _own_pids[pid] = last = now
        helpers += last
    return t.user + t.system + helpers + _retired_seconds


_procs: dict[int, "psutil.Process"] = {}  # helper pid -> its psutil handle (reused: cheap reads)


def _helper(pid: int) -> "psutil.Process | None":
    proc = _procs.get(pid)
    if proc is None:
        try:
            proc = _procs[pid] = psutil.Process(pid)
        except (psutil.Error, OSError):
            return None
    return proc


def _own_running() -> int:
    """Our tasks running or runnable now: this process's threads (the reader among them; a
    framework's pool or OpenBLAS threads still spinning after a GEMM are no competitors) and the
    helper processes counted as ours."""
    return max(1, _own_threads_running()) + sum(_helper_running(pid) for pid in tuple(_own_pids))


def _own_threads_running() -> int:
    """This process's threads in state R, from /proc/self/task/<tid>/stat: psutil reads a
    thread's state only through a whole Process object per thread (0.37 ms each, measured),
    where this costs about 10 us per thread, paid only after an idle gap."""
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return 1
    running = 0
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue  # the thread ended
        running += raw[raw.rfind(b")") + 2:raw.rfind(b")") + 3] == b"R"
    return running


def _helper_running(pid: int) -> bool:
    proc = _helper(pid)
    try:
        return proc is not None and proc.status() == psutil.STATUS_RUNNING
    except (psutil.Error, OSError):
        _procs.pop(pid, None)
        return False


def _machine_running() -> int | None:
    """Tasks running or runnable on the machine now (/proc/loadavg's 4th field: psutil has no
    such count)."""
    try:
        with open("/proc/loadavg", "rb") as f:
            return int(f.read().split()[3].split(b"/")[0])
    except (OSError, IndexError, ValueError):
        return None


def _running_others() -> float | None:
    """Tasks of other processes running now: the machine's minus ours, whose threads may be busy
    with work other than the emulator's (a framework's thread pool) and are no competitors.
    Costs about 10 us per thread of this process, paid only after an idle gap."""
    running = _machine_running() if psutil is not None else None
    return None if running is None else float(max(0, running - _own_running()))


def _other_cores(now: float) -> float:
    """Cores' worth of work from other processes, measured as described in the module docstring."""
    global _counters
    busy = _machine_busy_seconds()
    previous = _counters
    _counters = None if busy is None else _Counters(now, busy, _own_seconds())
    if busy is None:
        try:
            return max(0.0, os.getloadavg()[0] - 1.0)
        except (AttributeError, OSError):
            return 0.0
    if previous is not None and 0.0 < now - previous.when <= WINDOW_SECONDS:
        assert _counters is not None
        others = (_counters.machine_busy - previous.machine_busy) - (_counters.own - previous.own)
        return max(0.0, others / (now - previous.when))
    instant = _running_others()
    return 0.0 if instant is None else instant


def _read() -> _Reading:
    global _reading
    now = _clock()
    if _reading is not None and now - _reading.when < READING_SECONDS:
        return _reading
    try:
        usable = max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        usable = max(1, os.cpu_count() or 1)
    machine = max(usable, os.cpu_count() or usable)
    taken = max(0, math.ceil(_other_cores(now) - BACKGROUND_CORES))
    _reading = _Reading(now, usable, max(1, min(usable, machine - taken)))
    return _reading


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask), at least 1."""
    return _read().usable


def free_cpus() -> int:
    """Usable CPUs that other processes are not using now, at least 1: how many threads a run
    of ours should spread over."""
    return _read().free


#: The kernel's CPU pressure (PSI): the cumulative microseconds in which some runnable task
#: waited for a CPU ("some ... total=").
PRESSURE_FILE = "/proc/pressure/cpu"
_pressure: tuple[float, int, float | None] | None = None  # (when, total us, the share it gave)


def _pressure_total() -> tuple[int, float] | None:
    """(total us, avg10 share) of the "some" line of PRESSURE_FILE; None without PSI."""
    try:
        with open(PRESSURE_FILE, "rb") as f:
            line = f.readline()
        fields = dict(field.split(b"=", 1) for field in line.split()[1:])
        return int(fields[b"total"]), float(fields[b"avg10"]) / 100.0
    except (OSError, ValueError, KeyError):
        return None


def cpu_pressure() -> float | None:
    """The share of time, over the last READING_SECONDS or more, in which some runnable task of
    the machine waited for a CPU (the kernel's pressure stall information; its 10 s average at
    the first reading); None where the kernel does not say. Why beside free_cpus: a process that
    polls makes the CPU time of others look small (on a 2-CPU host, a poller holding one CPU
    leaves others at most one), while the tasks it keeps waiting show here."""
    global _pressure
    now = _clock()
    if _pressure is not None and now - _pressure[0] < READING_SECONDS:
        return _pressure[2]
    read = _pressure_total()
    if read is None:
        _pressure = (now, 0, None)
        return None
    total, avg10 = read
    if _pressure is not None and 0.0 < now - _pressure[0] <= WINDOW_SECONDS:
        share = min(1.0, max(0.0, (total - _pressure[1]) * 1e-6 / (now - _pressure[0])))
    else:
        share = avg10
    _pressure = (now, total, share)
    return share


_sched_getcpu = None  # libc's sched_getcpu, bound at first use


def current_cpu() -> int:
    """The CPU this thread runs on now (-1 where the system does not say): the GpSimd host and
    worker write theirs into their control page so that neither polls on the CPU the other
    needs (emulator/gpsimd/control.shares_cpu). Through libc's sched_getcpu (0.4 us with
    ctypes): Python's os module has no such call."""
    global _sched_getcpu
    if _sched_getcpu is None:
        import ctypes

        try:
            function = ctypes.CDLL(None).sched_getcpu
        except (AttributeError, OSError):
            function = False
        else:
            function.restype = ctypes.c_int
            function.argtypes = []
        _sched_getcpu = function
    if not _sched_getcpu:
        return -1
    return int(_sched_getcpu())


def leave_cpu(cpu: int) -> bool:
    """Moves this thread off CPU `cpu` onto another it may run on, now: its affinity is narrowed
    to the others and at once restored; whether it is off `cpu` afterwards. Why (the GpSimd
    worker, before it polls, when it finds the host on its CPU): on this kind of virtual machine a
    halted virtual CPU counts as preempted, which the scheduler avoids, so a thread woken by a
    pipe write or a timer comes back to its waker's busy CPU instead of the idle one; a narrowed
    affinity migrates it and wakes the other CPU for it. The runtime's C loop does the same
    (runtime/gpsimd_serve.h)."""
    try:
        allowed = os.sched_getaffinity(0)
        others = allowed - {cpu}
        if not others:
            return False
        os.sched_setaffinity(0, others)
        os.sched_setaffinity(0, allowed)
    except (AttributeError, OSError):
        return False
    return current_cpu() != cpu


def forget_reading() -> None:
    """Read the machine afresh next time, with no CPU-time window (tests that fake it call this)."""
    global _reading, _counters, _pressure
    _reading = None
    _counters = None
    _pressure = None
