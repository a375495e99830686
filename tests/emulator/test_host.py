"""emulator/host.py: free cores from other processes' CPU time over the last window, an
instantaneous count after an idle gap, one reading reused for a second."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from emulator import host


class FakeMachine:
    """A 2-core machine whose counters the test moves by hand."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 1000.0
        self.busy = 0.0  # machine-wide busy CPU seconds
        self.own = 0.0  # this process's CPU seconds
        self.running = 1  # tasks running now, the reader included
        self.reads = 0
        monkeypatch.setattr(host, "_clock", lambda: self.now)
        monkeypatch.setattr(host, "_machine_busy_seconds", self._busy)
        monkeypatch.setattr(host, "_own_seconds", lambda: self.own)
        monkeypatch.setattr(host, "_running_others", lambda: float(self.running - 1))
        monkeypatch.setattr(host.os, "sched_getaffinity", lambda pid: {0, 1})
        monkeypatch.setattr(host.os, "cpu_count", lambda: 2)
        host.forget_reading()

    def _busy(self) -> float:
        self.reads += 1
        return self.busy

    def advance(self, seconds: float, others: float, own: float = 0.0) -> None:
        """`seconds` pass while other processes use `others` cores and we use `own`."""
        self.now += seconds
        self.busy += seconds * (others + own)
        self.own += seconds * own


@pytest.fixture
def machine(monkeypatch):
    fake = FakeMachine(monkeypatch)
    yield fake
    host.forget_reading()


def test_first_reading_counts_the_tasks_running_now(machine):
    machine.running = 3  # two strangers besides the reader
    assert host.usable_cpus() == 2 and host.free_cpus() == 1
    host.forget_reading()
    machine.running = 1
    assert host.free_cpus() == 2


def test_a_reading_is_reused_within_its_window_and_renewed_after(machine):
    host.free_cpus()
    host.usable_cpus()
    host.free_cpus()
    assert machine.reads == 1  # one reading served all three questions
    machine.advance(host.READING_SECONDS + 0.01, others=0.0)
    host.free_cpus()
    assert machine.reads == 2


def test_other_processes_cpu_time_over_the_window_takes_cores(machine):
    machine.running = 5  # a busy instant at the first reading
    host.free_cpus()
    machine.advance(2.0, others=1.0)  # one stranger kept one core busy
    assert host.free_cpus() == 1
    machine.advance(2.0, others=0.1)  # daemons only: below BACKGROUND_CORES
    assert host.free_cpus() == 2
    machine.advance(2.0, others=2.0)
    assert host.free_cpus() == 1  # never fewer than one


def test_our_own_work_never_counts_against_us(machine):
    host.free_cpus()
    machine.advance(2.0, others=0.0, own=2.0)  # our BLAS threads kept both cores busy
    assert host.free_cpus() == 2
    machine.running = 3  # and were still spinning when read: irrelevant inside the window
    machine.advance(1.5, others=0.0, own=2.0)
    assert host.free_cpus() == 2


def test_after_an_idle_gap_the_instant_count_replaces_the_stale_window(machine):
    host.free_cpus()
    machine.advance(host.WINDOW_SECONDS + 5.0, others=2.0)  # long ago and busy on average...
    machine.running = 1  # ...but quiet now
    assert host.free_cpus() == 2


def test_without_proc_the_load_average_decides(machine, monkeypatch):
    monkeypatch.setattr(host, "_machine_busy_seconds", lambda: None)
    monkeypatch.setattr(host.os, "getloadavg", lambda: (4.0, 0.0, 0.0))
    assert host.free_cpus() == 1
    host.forget_reading()
    monkeypatch.setattr(host.os, "getloadavg", lambda: (1.0, 0.0, 0.0))
    assert host.free_cpus() == 2


def test_helper_processes_time_is_ours_and_stays_ours_after_they_exit():
    """A real child burning CPU: counted in our total while registered, and the total does not
    fall when it exits and is no longer counted (a fall would look like a stranger's work)."""
    host.forget_reading()
    # The child burns only once told to, after `before` is read: a loaded machine may otherwise
    # run most of its 0.3 s before this process reads it (a flaky failure under pytest -n 2).
    child = subprocess.Popen([sys.executable, "-c", "import sys, time\nsys.stdin.readline()\nt=time.process_time()\n"
                              "while time.process_time()-t<0.3: pass\nsys.stdin.read()"],
                             stdin=subprocess.PIPE)
    host.count_as_own(child.pid)
    try:
        before = host._own_seconds()
        assert child.stdin is not None
        child.stdin.write(b"go\n")
        child.stdin.flush()
        deadline = 200
        while host._own_seconds() - before < 0.2 and deadline:
            os.sched_yield()
            subprocess.run(["sleep", "0.02"])
            deadline -= 1
        counted = host._own_seconds()
        assert counted - before >= 0.2
    finally:
        child.communicate(b"")
    host.count_as_own(child.pid, own=False)
    assert host._own_seconds() >= counted
    assert child.pid not in host._own_pids


def test_the_instant_count_leaves_out_our_own_running_tasks(monkeypatch):
    """Our own threads (a framework's pool, OpenBLAS threads still spinning) and GpSimd workers
    are not strangers."""
    monkeypatch.setattr(host, "_machine_running", lambda: 4)
    monkeypatch.setattr(host, "_own_running", lambda: 3)
    assert host._running_others() == 1.0
    monkeypatch.setattr(host, "_own_running", lambda: 5)  # counted at another instant
    assert host._running_others() == 0.0
    monkeypatch.setattr(host, "_machine_running", lambda: None)
    assert host._running_others() is None


def test_own_running_counts_busy_threads_of_ours_and_a_busy_helper():
    assert host._own_running() >= 1  # the reader itself is running
    import hashlib
    import threading
    import time

    stop = threading.Event()
    data = bytes(32 << 20)

    def busy() -> None:  # hashing releases the GIL: the thread runs beside the reader
        while not stop.is_set():
            hashlib.sha256(data).digest()

    worker = threading.Thread(target=busy)
    worker.start()
    try:
        time.sleep(0.05)
        # a busy thread of ours is ours, not a stranger's (at some instant of ten tries)
        assert max(host._own_running() for _ in range(10)) >= 2
    finally:
        stop.set()
        worker.join()
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        host.count_as_own(child.pid)
        assert host._own_running() >= 2  # a busy loop is always running or runnable
        assert host._process_seconds(child.pid) is not None
    finally:
        child.kill()
        child.wait()
        host.count_as_own(child.pid, own=False)
    assert host._process_seconds(child.pid) is None  # gone


def test_real_reading_is_sane():
    host.forget_reading()
    usable = host.usable_cpus()
    assert 1 <= host.free_cpus() <= usable


def test_the_current_cpu_is_one_this_thread_may_run_on() -> None:
    # The GpSimd host and worker write theirs into the control page (control.shares_cpu).
    assert host.current_cpu() in os.sched_getaffinity(0)


def test_cpu_pressure_is_the_share_of_the_window_in_which_tasks_waited(machine, monkeypatch, tmp_path):
    """The kernel's "some" total over the last window (its 10 s average at the first reading);
    one reading a second; None without the file."""
    psi = tmp_path / "cpu"
    monkeypatch.setattr(host, "PRESSURE_FILE", str(psi))

    def write(total_us: int, avg10: float) -> None:
        psi.write_text(f"some avg10={avg10:.2f} avg60=0.00 avg300=0.00 total={total_us}\n"
                       "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    write(5_000_000, 12.5)
    assert host.cpu_pressure() == pytest.approx(0.125)
    write(5_600_000, 12.5)  # 0.6 s of waiting ...
    assert host.cpu_pressure() == pytest.approx(0.125)  # ... not read within a second
    machine.advance(2.0, others=0.0)
    assert host.cpu_pressure() == pytest.approx(0.3)  # 0.6 s in 2 s
    psi.unlink()
    machine.advance(2.0, others=0.0)
    assert host.cpu_pressure() is None


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to move between")
def test_a_thread_leaves_a_cpu_at_once_and_keeps_its_affinity() -> None:
    import threading

    got: list[tuple[bool, int, int, set[int]]] = []

    def run() -> None:
        cpu = host.current_cpu()
        moved = host.leave_cpu(cpu)
        got.append((moved, cpu, host.current_cpu(), os.sched_getaffinity(0)))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    moved, before, after, allowed = got[0]
    assert moved and after != before
    assert allowed == os.sched_getaffinity(0)  # restored: the move pins nothing


def test_a_thread_with_one_cpu_can_not_leave_it() -> None:
    import threading

    got: list[bool] = []
    cpu = min(os.sched_getaffinity(0))

    def run() -> None:
        os.sched_setaffinity(0, {cpu})
        got.append(host.leave_cpu(cpu))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert got == [False]
