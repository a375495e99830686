"""One GpSimd worker subprocess: starting it, loading its library, and one request at a time.

Everything of a user's library that executes (static initialisers, the registration body, shape
functions, compute functions) runs in this process, never in the host. This module only reports
what happened to the worker (`WorkerDied`, `WorkerTimedOut`, `LibraryError` at load); callers
turn a death or a time-out into the exception that names what was running (runner.py for compute
functions, library.py for shape functions and the registration table).
"""

from __future__ import annotations

import logging
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from emulator import host
from emulator.gpsimd import control, protocol, sandbox
from emulator.gpsimd.errors import GpSimdError, LibraryError
from emulator.limits import LimitSettingError

log = logging.getLogger(__name__)

#: How long the Python interpreter of a new worker may take to start (not the user's code: on a
#: loaded machine an interpreter start can take seconds).
STARTUP_TIMEOUT = 60.0
_PROJECT_ROOT = Path(__file__).resolve().parents[2]


def signal_name(returncode: int) -> str:
    """'SIGSEGV' for a process killed by a signal, else its exit status."""
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit status {returncode}"


#: AWS's runtime setting for the device printf buffer: 0 disables printf, else a power of two up to
#: 128 KB (unset here: 64 KB, since the emulator is for debugging).
PRINTF_QUEUE_ENV = "NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES"
PRINTF_QUEUE_MAX = 128 * 1024


def printf_queue_setting() -> str | None:
    """The checked value of NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES (None: unset), which the
    worker's runtime reads; anything but 0 or a power of two up to 131072 is a clear error."""
    text = os.environ.get(PRINTF_QUEUE_ENV, "").strip()
    if not text:
        return None
    value = int(text) if text.isdigit() else -1
    if value < 0 or value > PRINTF_QUEUE_MAX or (value & (value - 1)):
        raise GpSimdError(f"{PRINTF_QUEUE_ENV}={text!r}: must be 0 (printf disabled) or a power of two "
                          f"up to {PRINTF_QUEUE_MAX} (128 KB)")
    return str(value)


_seccomp_reported: set[str] = set()


def _report_seccomp(state: object) -> None:
    """Logs, once per reason, that workers run without the seccomp filter (sandbox.py)."""
    if state == "on" or state in _seccomp_reported:
        return
    _seccomp_reported.add(str(state))
    log.warning("GpSimd workers run without their seccomp filter (%s): a kernel can signal or "
                "trace other processes of this user; run untrusted artifacts under an OS sandbox "
                "(docs/trust.md)", state)


class WorkerDied(GpSimdError):
    """The worker ended while a request was pending (a crash of the code it was running)."""

    def __init__(self, returncode: int, detail: str) -> None:
        super().__init__(f"the GpSimd worker died ({signal_name(returncode)})")
        self.returncode = returncode
        self.signal = signal_name(returncode)
        self.detail = detail

    def suffix(self) -> str:
        """The worker's last stderr output, for the caller's message."""
        return f"; worker output: {self.detail}" if self.detail else ""


class WorkerTimedOut(GpSimdError):
    """A request got no answer within its time limit; the worker was killed."""


class WorkerMisbehaved(GpSimdError):
    """The worker broke the protocol (a message or page word no worker sends: its kernel wrote
    over them, say); it was killed."""


class WorkerProcess:
    """A worker subprocess with its library loaded, and the inputs' arena it shares with the host.

    Construction waits for the interpreter to start (`STARTUP_TIMEOUT`) and then for the library
    to load (`load_timeout`): a static initialiser that crashes or hangs raises `LibraryError`
    naming the library file, and the host is unharmed.
    """

    def __init__(self, library_path: Path, sha256: str, load_timeout: float, label: str | None = None,
                 cpu_seconds: float = 8 * 300.0) -> None:
        self.library_path = library_path
        self.label = label or library_path.name  # how messages name the library
        printf_queue = printf_queue_setting()
        self.arena = protocol.Arena()
        req_r, self.req_w = os.pipe()
        self.resp_r, resp_w = os.pipe()
        self.stderr = tempfile.TemporaryFile()
        control_fd, self.control = control.create()
        #: The latest prepared call's sequence number (control.REQUEST).
        self.sequence = 0
        self._spinner = control.Spinner(control.HOST_SPIN)
        self.waits = control.HostWaits()
        self.runs = control.GraphRuns()  # the graph runs this worker's calls come from (prime, MORE)
        try:
            memory = sandbox.memory_limit()
        except LimitSettingError as e:
            raise GpSimdError(str(e)) from None
        # The least the worker needs (sandbox.py): a scrubbed environment, its own session and
        # process group (killed as a whole, children a kernel forked included), limits that the
        # worker applies to itself before loading the library.
        env = sandbox.environment(str(_PROJECT_ROOT))
        env.pop(PRINTF_QUEUE_ENV, None)
        if printf_queue is not None:
            env[PRINTF_QUEUE_ENV] = printf_queue
        cpu_budget = max(cpu_seconds, 1.0)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "emulator.gpsimd.worker", str(req_r), str(resp_w), str(library_path), sha256,
             str(memory), f"{cpu_budget:g}", str(control_fd)],
            pass_fds=(req_r, resp_w, control_fd),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.stderr,
            env=env,
            start_new_session=True,
        )
        # Readable once the worker ends: a crash is seen at once even when a process the kernel
        # forked still holds the reply pipe open.
        self.pidfd = os.pidfd_open(self.proc.pid)
        host.count_as_own(self.proc.pid)  # its kernels' CPU time is ours, not a competitor's
        os.close(req_r)
        os.close(resp_w)
        os.close(control_fd)  # the mapping keeps the page
        try:
            self._start(load_timeout)
        except BaseException:
            self.kill()
            raise

    def _start(self, load_timeout: float) -> None:
        name = self.label
        try:
            started = protocol.receive(self.resp_r, STARTUP_TIMEOUT)
        except TimeoutError:
            raise GpSimdError(f"the GpSimd worker for {name} did not start within {STARTUP_TIMEOUT:g} s") from None
        if started is None:
            status, output = self._exit_detail()
            raise GpSimdError(f"the GpSimd worker for {name} failed to start ({status}){output}")
        _report_seccomp(started.get("seccomp"))
        try:
            loaded = protocol.receive(self.resp_r, load_timeout)
        except TimeoutError:
            raise LibraryError(
                f"GpSimd library {name} did not finish loading within {load_timeout:g} s: a static "
                "initialiser (global constructor) of the library runs too long or forever; "
                "the worker was killed"
            ) from None
        if loaded is None:
            status, output = self._exit_detail()
            raise LibraryError(
                f"GpSimd library {name} crashed while loading ({status}): a static initialiser "
                "(global constructor) of the library crashed or threw; the host process is "
                "unharmed" + output
            )
        if not loaded["ok"]:
            raise LibraryError(loaded["error"])
        #: Which loop answers prepared calls in the worker: "native" (the runtime's, in C) or
        #: "python" (a library built before it, or NEURON_CUSTOMCALL_GPSIMD_LOOP=python).
        self.loop = str(loaded.get("loop", "python"))

    def _exit_detail(self) -> tuple[str, str]:
        """How the worker ended and a suffix quoting its last stderr output."""
        returncode = self.proc.wait()
        tail = self.stderr_tail()
        return signal_name(returncode), (f"; worker output: {tail}" if tail else "")

    def stderr_tail(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()[-2000:].decode("utf-8", "replace").strip()

    def request(self, message: dict | bytes, timeout: float) -> dict:
        """Sends one request (a message, or its encoded body) and returns the reply;
        `WorkerTimedOut` (worker killed) or `WorkerDied` (worker reaped) when there is none."""
        # A prime withdrawn first: a worker woken by one reads a wake token from the pipe, which
        # is only sure to be one while the word says so (control.py).
        self.control.words[control.PRIME] = 0
        try:
            protocol.send_body(self.req_w, message if isinstance(message, bytes) else protocol.encode(message))
            reply = protocol.receive(self.resp_r, timeout, protocol.REPLY_SPIN, self.pidfd)
        except protocol.PeerExited:
            reply = None
        except TimeoutError:
            self.kill()
            raise WorkerTimedOut(f"no answer within {timeout:g} s; the worker was killed") from None
        except BrokenPipeError:
            reply = None
        except BaseException:
            # Interrupted (e.g. KeyboardInterrupt) with a reply possibly pending: this worker's
            # stream can not be trusted any more.
            self.kill()
            raise
        if reply is None:
            self._died()
        return reply

    def call(self, call_id: int, timeout: float) -> int:
        """Runs prepared call `call_id` through the control page and returns its code (the
        counters, text and error are in the page); `WorkerTimedOut`, `WorkerDied` or
        `WorkerMisbehaved` (worker killed) when there is no proper reply."""
        words = self.control.words
        self.sequence += 1
        sequence = self.sequence
        deadline = time.monotonic() + timeout
        spin = control.worker_spin()
        # Our CPU, for the worker not to poll on it, and ours not to poll on the worker's
        # (control.shares_cpu); only read while polling at all.
        cpu = host.current_cpu() if spin > 0 else -1
        poll = spin > 0
        # Read before the request: a polling worker takes it at once and writes its CPU again.
        worker_here = control.shares_cpu(words, control.WORKER_CPU, cpu)
        waits = self.waits
        waits.calls += 1
        try:
            words[control.POLL] = int(spin * 1e9)
            words[control.WAKE_AHEAD] = int(control.wake_ahead(spin) * 1e9)
            words[control.MORE] = self.runs.call(time.monotonic()) and poll
            words[control.HOST_CPU] = cpu
            words[control.CALL] = call_id
            words[control.REQUEST_AT] = time.monotonic_ns()
            words[control.REQUEST] = sequence
            if words[control.WORKER_WAITING]:
                # The worker sleeps: wake it. With a CPU for each side, poll for the reply while
                # it wakes and runs (the CPU is free, and a sleeping host must be woken in turn:
                # on an idle virtual machine each wake-up costs tens of microseconds, a bare pipe
                # round trip 65 us against 3 us under load); without, sleep at once, since a
                # poller would take the CPU the woken worker needs. (Where the worker last ran
                # says nothing here: the scheduler wakes it on an idle CPU if there is one.)
                os.write(self.req_w, control.WAKE_TOKEN)
                waits.woke += 1
                if not (poll and self._spinner.poll(words, control.REPLY, sequence, timeout)):
                    self._sleep_for_reply(sequence, deadline, woken=True)
            elif not poll or worker_here:
                self._sleep_for_reply(sequence, deadline)
            # Poll for the reply only while the worker runs the call (it took it in time), on
            # a CPU of its own.
            elif not (self._spinner.poll(words, control.TAKEN, sequence, min(control.TAKE_SPIN, timeout))
                      and not control.shares_cpu(words, control.WORKER_CPU, cpu)
                      and self._spinner.poll(words, control.REPLY, sequence, timeout)):
                self._sleep_for_reply(sequence, deadline)
        except TimeoutError:
            self.kill()
            raise WorkerTimedOut(f"no answer within {timeout:g} s; the worker was killed") from None
        except (protocol.PeerExited, BrokenPipeError):
            self._died()
        except WorkerMisbehaved:
            self.kill()
            raise
        except BaseException:
            self.kill()  # interrupted with the call running: the page can not be trusted any more
            raise
        return words[control.CODE]

    def prime(self, graph: int, run: int) -> None:
        """Run `run` of compiled graph `graph` starts (the executor's run-start hook): while the
        machine has a CPU for each side, a sleeping worker is woken now to poll for the run's
        first call, which comes once the host has run the graph up to it (control.py: a graph's
        runs). Never fails: a worker that is gone is reported by the next call."""
        runs = self.runs
        if not runs.start(graph, run, time.monotonic()):
            return
        words = self.control.words
        if not words[control.WORKER_WAITING]:
            return  # polling or running: the call will find it
        window = runs.window()
        if window <= 0 or control.worker_spin() <= 0:
            return
        words[control.HOST_CPU] = host.current_cpu()
        words[control.PRIME_POLL] = int(window * 1e9)
        words[control.PRIME] = self.sequence + 1
        try:
            os.write(self.req_w, control.WAKE_TOKEN)
        except OSError:
            return
        self.waits.primed += 1

    def _sleep_for_reply(self, sequence: int, deadline: float, woken: bool = False) -> None:
        """Waits on the reply pipe (wake tokens) and the worker's pidfd until the page holds the
        reply to `sequence`: sleeps are short slices until one passes without a token (control.py:
        lost wake-ups; a token left from an earlier call must not use the slice up). Unless this
        call `woken` the worker (its token then waits in the pipe, however long the worker takes
        to get a CPU), a slice that passes with the worker asleep and the call not taken means its
        wake-up was lost (its flag and this request crossed): it is woken now, once. This side's
        recovery is what lets the worker sleep on its pipe without a slice of its own."""
        words = self.control.words
        self.waits.slept += 1
        words[control.HOST_WAITING] = 1
        try:
            sliced = True
            while words[control.REPLY] != sequence:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                wait = min(control.FIRST_SLICE, remaining) if sliced else remaining
                ready = select.select([self.resp_r, self.pidfd], [], [], wait)[0]
                if (not ready and not woken and words[control.WORKER_WAITING]
                        and words[control.TAKEN] != sequence):
                    os.write(self.req_w, control.WAKE_TOKEN)
                    self.waits.rewoke += 1
                    woken = True
                    continue
                sliced = bool(ready)
                if self.resp_r in ready:
                    # Only wake tokens come during a call (4 bytes, written at once): one read.
                    token = os.read(self.resp_r, len(control.WAKE_TOKEN))
                    if not token:
                        raise protocol.PeerExited
                    if token != control.WAKE_TOKEN:
                        raise WorkerMisbehaved("the GpSimd worker sent a message during a call; it was killed")
                elif ready and words[control.REPLY] != sequence:
                    raise protocol.PeerExited
        finally:
            words[control.HOST_WAITING] = 0

    def _died(self) -> None:
        """Reaps a worker that ended while a request was pending and raises `WorkerDied`."""
        self._kill_group()  # what the kernel forked, still holding the pipe
        returncode = self.proc.wait()
        detail = self.stderr_tail()
        self.close()
        raise WorkerDied(returncode, detail)

    def alive(self) -> bool:
        """Whether the worker runs (asked of its pidfd, which does not reap it)."""
        return self.req_w >= 0 and self.pidfd >= 0 and not select.select([self.pidfd], [], [], 0)[0]

    def _kill_group(self) -> None:
        """Kills the worker's process group: the worker and anything its kernels forked. Only
        while the worker is not reaped (a zombie keeps its pid, and so the group id, from reuse)."""
        if self.proc.returncode is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def kill(self) -> None:
        self._kill_group()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.close()

    def close(self) -> None:
        if not self.control.map.closed:
            self.control.words[control.PRIME] = 0  # the pipe's end is then read as such, not as a prime's token
        for fd in (self.req_w, self.resp_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.req_w = self.resp_r = -1
        self._kill_group()  # the worker, and what its kernels forked (they would outlive it)
        self.proc.wait()
        host.count_as_own(self.proc.pid, own=False)
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1
        self.arena.close()
        self.control.close()
        if not self.stderr.closed:
            self.stderr.close()
