"""Issue 16 "native code in artifacts": the worker resolves only the compute functions the
library registered, runs with resource limits, a scrubbed environment and its own process
group, and a kernel that forks before crashing is reported at once, its child killed."""

from __future__ import annotations

import dataclasses
import errno
import os
import struct
import time

import numpy as np
import pytest

from emulator.gpsimd import GpSimdRunner, HostLibrary, KernelCrash, KernelError, sandbox, seccomp
from gpsimd_kernels import library, tensor

X = np.zeros(8, dtype=np.float32)


@pytest.fixture
def hostile():
    runner = GpSimdRunner(library("hostile_ops"), timeout=60)
    host = HostLibrary(runner.library_path, runner)
    yield host, runner
    runner.close()


def _fresh_worker_output(name: str) -> str:
    """What kernel `name` prints in a worker started for it (under the environment as set now)."""
    runner = GpSimdRunner(library("hostile_ops"), timeout=60)
    try:
        host = HostLibrary(runner.library_path, runner)
        return _run(host, runner, name).text
    finally:
        runner.close()


def _run(host, runner, name, *extra, timeout=None):
    op = host.descriptor.op(name)
    x = tensor(X)
    return runner.run(op, [x, *extra], host.shape(op, [x.spec, *extra]), timeout=timeout, print_output=False)


@pytest.mark.parametrize("symbol", ["abort", "exit", "_Z5probeRKN5torch6TensorE"])
def test_only_the_registered_compute_function_of_the_op_resolves(hostile, symbol) -> None:
    host, runner = hostile
    op = host.descriptor.op("spin")  # index of `spin`; `probe`'s symbol is not its compute function
    forged = dataclasses.replace(op, symbol=symbol)
    with pytest.raises(KernelError, match="is not a compute function this library registered") as info:
        runner.run(forged, [tensor(X)], host.shape(op, [tensor(X).spec]), print_output=False)
    assert info.value.kind == "usage"
    assert _run(host, runner, "probe").text  # the worker is still there


def test_the_worker_runs_with_limits_a_scrubbed_environment_and_its_own_group(monkeypatch) -> None:
    monkeypatch.setenv("NCC_TEST_SECRET", "hunter2")
    monkeypatch.setenv(sandbox.MEMORY_ENV, str(8 << 30))
    text = _fresh_worker_output("probe")
    assert "secret=absent" in text
    assert f"core=0 as={8 << 30} fsize={sandbox.FILE_SIZE}" in text
    cpu = int(text.split("cpu=")[1].split()[0])
    assert 0 < cpu < 10 ** 6  # a budget, re-armed per request, not unlimited
    assert "own_group=1" in text


def test_a_bad_memory_setting_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setenv(sandbox.MEMORY_ENV, "lots")
    runner = GpSimdRunner(library("hostile_ops"), timeout=60)
    with pytest.raises(Exception, match="NEURON_CUSTOMCALL_GPSIMD_MEMORY='lots'"):
        HostLibrary(runner.library_path, runner)
    runner.close()


def test_a_kernel_that_forks_then_crashes_is_reported_at_once_and_its_child_killed(hostile) -> None:
    host, runner = hostile
    start = time.monotonic()
    with pytest.raises(KernelCrash, match="SIGABRT"):
        _run(host, runner, "fork_then_crash", 120)
    assert time.monotonic() - start < 30  # not the 60 s time-out
    # The child (which would sleep 120 s holding the pipe) is gone with the worker's group.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _children_of_group(runner):
        time.sleep(0.1)
    assert not _children_of_group(runner)
    assert _run(host, runner, "probe").text  # a fresh worker


def _children_of_group(runner) -> list[int]:
    """Processes still in a process group this runner's workers led (none: all killed)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) in runner_groups:
            found.append(int(entry))
    return found


runner_groups: set[int] = set()


@pytest.fixture(autouse=True)
def _record_groups(monkeypatch):
    from emulator.gpsimd import process

    original = process.WorkerProcess.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        runner_groups.add(self.proc.pid)

    monkeypatch.setattr(process.WorkerProcess, "__init__", init)


def _reach_out(monkeypatch, seccomp_setting: str | None) -> dict[str, tuple[int, int]]:
    if seccomp_setting is None:
        monkeypatch.delenv(seccomp.ENV, raising=False)
    else:
        monkeypatch.setenv(seccomp.ENV, seccomp_setting)
    text = _fresh_worker_output("reach_out")
    found = {}
    for line in text.splitlines():
        what, _, result = line.partition("=")
        if "/" in result:
            ret, err = result.split("/")
            found[what] = (int(ret), int(err))
    return found


def test_a_kernel_cannot_signal_or_trace_the_host_or_leave_its_group(monkeypatch) -> None:
    seen = _reach_out(monkeypatch, None)
    eperm = (-1, errno.EPERM)
    assert seen["kill_host"] == eperm  # the host's pid: refused by the filter
    assert seen["kill_all"] == eperm
    assert seen["tgkill_host"] == eperm
    assert seen["ptrace_host"] == eperm
    assert seen["child_setsid"] == eperm  # a forked child cannot escape the group kill
    assert seen["kill_self"] == (0, 0)  # raise/abort on itself still work
    assert seen["kill_group"] == (0, 0)


def test_without_the_filter_the_same_kernel_reaches_the_host(monkeypatch, caplog) -> None:
    # The control for the test above: the probe does reach the host when the filter is off.
    with caplog.at_level("WARNING", logger="emulator.gpsimd.process"):
        seen = _reach_out(monkeypatch, "0")
    assert seen["kill_host"] == (0, 0)
    assert seen["child_setsid"] == (0, 0)
    assert "ptrace_host" not in seen  # never tried unfiltered: it would stop this process
    assert any(seccomp.ENV in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("machine", sorted(seccomp.TABLES))
def test_the_filter_program_is_well_formed(machine) -> None:
    code = seccomp.program(seccomp.TABLES[machine], 4242)
    assert len(code) % 8 == 0 and len(code) // 8 < 4096  # BPF_MAXINSNS
    insns = [struct.unpack("<HBBI", code[i:i + 8]) for i in range(0, len(code), 8)]
    for i, (op, jt, jf, _) in enumerate(insns):  # every jump lands inside the program
        if op & 0x07 == 0x05:  # BPF_JMP
            assert i + 1 + max(jt, jf) < len(insns)
        else:
            assert jt == jf == 0
    assert insns[-1] == (0x06, 0, 0, seccomp.RET_ALLOW)
