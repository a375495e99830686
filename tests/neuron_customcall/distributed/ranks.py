"""Ranks of a gloo world as worker processes on localhost, for the distributed tests: a free
port, the processes started with torch.distributed's env:// variables (what torchrun sets up),
and their exit codes collected with a bound, none left running."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(worker: Path, args: Sequence[str], world_size: int, **env: str) -> list[subprocess.Popen]:
    """One `worker` process per rank (argv: `args`), meeting at a free port; `env` adds variables."""
    port = free_port()
    return [subprocess.Popen([sys.executable, str(worker), *args],
                             env=dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                                      WORLD_SIZE=str(world_size), PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu", **env),
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            for rank in range(world_size)]


def finish(procs: list[subprocess.Popen], allowed: Sequence[int], wait_for: int | None = None) -> list[int]:
    """The exit codes of the first `wait_for` ranks (all by default), each one of `allowed`; the
    rest are killed."""
    codes = []
    try:
        for rank, p in enumerate(procs[:wait_for]):
            try:
                out, _ = p.communicate(timeout=300)
            except subprocess.TimeoutExpired:
                pytest.fail(f"rank {rank} did not finish within 300 s")
            if p.returncode not in allowed:
                pytest.fail(f"rank {rank} exited {p.returncode}:\n{out.decode(errors='replace')[-3000:]}")
            codes.append(p.returncode)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return codes
