"""The plugin's own gloo groups (rendezvous.gloo_group) at exit: closed while Python still runs,
so that no process aborts in finalization with gloo's threads alive ("terminate called without
an active exception", PyTorch's known exit-time abort), and left alone after a peer died or hung,
so that exit never waits on it. Two processes on localhost (exit_worker.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from emulator.collectives import CollectiveError
from neuron_customcall.distributed import rendezvous
from tests.neuron_customcall.distributed import ranks

ROOT = Path(__file__).resolve().parents[3]
WORKER = Path(__file__).with_name("exit_worker.py")


def _pair(mode: str, timeout_s: float) -> tuple[list[subprocess.CompletedProcess], float]:
    """Both processes' (returncode, output), and how long process 0 took in all."""
    port = ranks.free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONFAULTHANDLER="1")
    start = time.monotonic()
    procs = [subprocess.Popen([sys.executable, str(WORKER), str(rank), str(port), mode, str(timeout_s)], env=env,
                              cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for rank in (0, 1)]
    outs = []
    try:
        outs.append(procs[0].communicate(timeout=240)[0])
        took = time.monotonic() - start
        if mode == "hang":
            procs[1].kill()
        outs.append(procs[1].communicate(timeout=240)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [subprocess.CompletedProcess(p.args, p.returncode, out) for p, out in zip(procs, outs)], took


def _events(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("mode, runs", [("run", 3), ("default", 1)])
def test_processes_close_their_gloo_groups_at_exit_every_time(mode: str, runs: int):
    """The plugin's groups (rendezvous.gloo_group), or a communicator's on torch.distributed's
    default group, whose bucket groups (trailer.py) destroy_process_group does not end."""
    for _ in range(runs):  # the abort was rare (once in a full suite): every run must close, none abort
        done, _ = _pair(mode, 60)
        for rank, proc in enumerate(done):
            assert proc.returncode == 0 and "terminate called" not in proc.stdout, proc.stdout[-3000:]
            outcome, exit_state = _events(proc.stdout)
            assert outcome["second"] == (4 * np.arange(6) + 20).tolist()
            assert exit_state["closed"] is True, proc.stdout[-3000:]
            assert exit_state["threads_after"] < exit_state["threads_before"], exit_state  # gloo's threads stopped
            assert "closed 1 gloo group pair(s) at exit" in proc.stdout


def test_after_a_mismatch_both_processes_close_their_groups_and_exit_cleanly():
    """A mismatch found while both wait (their probes meet) ends every gloo call before the
    CollectiveError: the groups are idle, so exit closes them like a clean run's. Left alone, they
    were destroyed in finalization, where gloo's threads dropping their tensors can abort the
    process (seen in CI: "terminate called without an active exception", exit code -6)."""
    for _ in range(2):
        done, took = _pair("mismatch", 60)
        for rank, proc in enumerate(done):
            assert proc.returncode == 0 and "terminate called" not in proc.stdout, proc.stdout[-3000:]
            outcome, exit_state = _events(proc.stdout)
            assert "mismatched collectives" in outcome.get("error", ""), proc.stdout[-3000:]
            assert exit_state["closed"] is True, proc.stdout[-3000:]
            assert exit_state["threads_after"] < exit_state["threads_before"], exit_state
            assert "closed 1 gloo group pair(s) at exit" in proc.stdout
        assert took < 50, took  # the probes, not the 60 s timeout


@pytest.mark.parametrize("mode", ["die", "hang"])
def test_after_a_dead_or_hung_peer_exit_leaves_the_groups_and_does_not_wait(mode: str):
    done, took = _pair(mode, 6)
    proc = done[0]
    outcome, exit_state = _events(proc.stdout)
    assert "CollectiveError" in outcome.get("error", "") or "CollectiveTimeout" in outcome.get("error", ""), \
        proc.stdout[-3000:]
    assert exit_state["closed"] is False and "left open at exit: a collective over them failed" in proc.stdout
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert took < 60, took  # the 6 s timeout (hang) or the closed connection (die), then exit at once


class _Group:
    def __init__(self) -> None:
        self.alive = True


def test_detach_leaves_pending_and_failed_groups_alone():
    groups = rendezvous.GlooGroups(_Group(), _Group())
    with groups.in_use():
        assert groups.detach() == "1 gloo call(s) pending"
    data, control = groups.detach()
    assert data.alive and control.alive and groups.closed
    with pytest.raises(CollectiveError, match="closed at exit"):
        groups.data  # noqa: B018 - the property raises
    assert groups.detach() == "closed before"
    failed = rendezvous.GlooGroups(_Group(), _Group())
    with pytest.raises(RuntimeError), failed.in_use():
        raise RuntimeError("Connection closed by peer")
    assert "failed" in failed.detach() and not failed.closed
    # our own error (a mismatch whose calls were all ended) leaves them closable; fail() does not
    mismatched = rendezvous.GlooGroups(_Group(), _Group())
    with pytest.raises(CollectiveError), mismatched.in_use():
        raise CollectiveError("mismatched collectives")
    assert not mismatched.failed
    mismatched.fail()
    assert "failed" in mismatched.detach()


def test_groups_exit_can_not_close_are_kept_for_ever(monkeypatch: pytest.MonkeyPatch):
    """Pending or failed groups are never destroyed, not even in finalization (where gloo's
    threads would drop tensors without Python to take them); idle ones are dropped."""
    import sys as _sys

    monkeypatch.setattr(rendezvous, "_LIVE", [])
    monkeypatch.setattr(rendezvous, "_FOREVER", [])
    pending, idle = rendezvous.GlooGroups(_Group(), _Group()), rendezvous.GlooGroups(_Group(), _Group())
    rendezvous._LIVE.extend([pending, idle])
    with pending.in_use():
        before = _sys.getrefcount(rendezvous._FOREVER)
        rendezvous.close_at_exit(5)
    assert rendezvous._FOREVER == [pending] and not pending.closed and idle.closed
    assert _sys.getrefcount(rendezvous._FOREVER) > before  # the reference finalization never drops
