"""Emulated devices in separate processes, one world over torch.distributed (gloo on localhost):
each rank runs its device's part of a program with collectives, and every rank's outputs equal
those of the same devices run as threads of one process (emulator.collectives.run_devices, itself
matched against XLA:CPU and, for the in-place collective-permute and send/recv, NumPy). A peer that dies or hangs ends the others' collective with a clear
CollectiveError within the timeout; mismatched programs are named."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import hlo
from emulator import load_artifact
from emulator.collectives import run_devices
from neuron_customcall.compiler import compile_module

ROOT = Path(__file__).resolve().parents[3]
WORKER = Path(__file__).with_name("gloo_worker.py")

PROGRAM = """HloModule gloo_{n}, replica_count={n}
add_{n} {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}}
max_{n} {{
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT r = s32[] maximum(a, b)
}}
ENTRY e_{n} {{
  x = f32[4,{n}] parameter(0)
  i = s32[3] parameter(1)
  y = f32[67,251] parameter(2)
  big = f32[67,251] all-reduce(y), replica_groups={groups}, to_apply=add_{n}
  a2a = f32[4,{n}] all-to-all(x), dimensions={{1}}, replica_groups={groups}
  ar = f32[4,{n}] all-reduce(x), replica_groups={groups}, to_apply=add_{n}
  mx = s32[3] all-reduce(i), replica_groups={{}}, to_apply=max_{n}
  ag = f32[4,{gathered}] all-gather(x), dimensions={{1}}, replica_groups={groups}
  rs = f32[4,{scattered}] reduce-scatter(x), dimensions={{1}}, replica_groups={groups}, to_apply=add_{n}
  cp = f32[4,{n}] collective-permute(x), source_target_pairs={pairs}
  rid = u32[] replica-id()
  zero = f32[] constant(0)
  total = f32[] reduce(x, zero), dimensions={{0,1}}, to_apply=add_{n}
  scalar = f32[] all-reduce(total), replica_groups={{}}, to_apply=add_{n}
  fill = f32[] constant(-1)
  buf = f32[4,{n}] broadcast(fill), dimensions={{}}
  c0 = s32[] constant(0)
  c1 = s32[] constant(1)
  st_in = (s32[], s32[]) tuple(c1, c0)
  st_out = (s32[], s32[]) tuple(c0, c1)
  ip = f32[4,{n}] collective-permute(x, buf, st_in, st_out), source_target_pairs={pairs}, slice_sizes={{{{2,1}}}}
  tok = token[] after-all()
  rv = (f32[4,{n}], u32[], token[]) recv(tok), channel_id=5,
    frontend_attributes={{_xla_send_recv_source_target_pairs="{pairs}"}}
  sd = (f32[4,{n}], u32[], token[]) send(x, tok), channel_id=5,
    frontend_attributes={{_xla_send_recv_source_target_pairs="{pairs}"}}
  rd = (f32[4,{n}], token[]) recv-done(rv), channel_id=5
  sdd = token[] send-done(sd), channel_id=5
  got = f32[4,{n}] get-tuple-element(rd), index=0
  ROOT t = (f32[4,{n}], s32[3], f32[4,{gathered}], f32[4,{scattered}], f32[4,{n}], u32[], f32[], f32[67,251], f32[4,{n}], f32[4,{n}], f32[4,{n}]) tuple(ar, mx, ag, rs, cp, rid, scalar, big, a2a, ip, got)
}}"""


def _program(n: int) -> str:
    if n == 2:
        groups, size, pairs = "{{0,1}}", 2, "{{0,1},{1,0}}"
    else:
        groups, size, pairs = "{{0,2},{1,3}}", 2, "{{0,1},{1,2},{2,3}}"  # device 0 receives nothing: zeros
    return PROGRAM.format(n=n, groups=groups, gathered=n * size, scattered=n // size, pairs=pairs)


def _inputs(n: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(n)
    # the third value is above CHUNKED_ALL_REDUCE_BYTES: reduce-scatter then all-gather across processes
    return [[rng.standard_normal((4, n)).astype(np.float32), rng.integers(-50, 50, 3).astype(np.int32),
             rng.standard_normal((67, 251)).astype(np.float32)] for _ in range(n)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(tmp_path: Path, text: str, inputs: list[list[np.ndarray]], mode: str,
           timeout_s: float) -> list[subprocess.Popen]:
    """One worker process per rank (the env:// rendezvous torchrun would set up)."""
    (tmp_path / "m.hlo").write_text(text)
    np.savez(tmp_path / "in.npz", **{f"r{r}_{k}": a for r, ins in enumerate(inputs) for k, a in enumerate(ins)})
    port = _free_port()
    procs = []
    for rank in range(len(inputs)):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                   WORLD_SIZE=str(len(inputs)), PYTHONPATH=str(ROOT), TEST_COLLECTIVE_TIMEOUT=str(timeout_s),
                   JAX_PLATFORMS="cpu")
        procs.append(subprocess.Popen([sys.executable, str(WORKER), str(tmp_path / "m.hlo"), str(tmp_path / "in.npz"),
                                       str(tmp_path / "out"), mode], env=env, cwd=ROOT,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    return procs


def _finish(procs: list[subprocess.Popen], wait_for: int | None = None) -> list[int]:
    """The exit codes of the first `wait_for` ranks (all by default); the rest are killed."""
    codes = []
    try:
        for rank, p in enumerate(procs[:wait_for]):
            try:
                out, _ = p.communicate(timeout=300)
            except subprocess.TimeoutExpired:
                pytest.fail(f"rank {rank} did not finish within 300 s")
            if p.returncode not in (0, 2, 3):
                pytest.fail(f"rank {rank} exited {p.returncode}:\n{out.decode(errors='replace')[-3000:]}")
            codes.append(p.returncode)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return codes


@pytest.mark.parametrize("n", [2, 4])
def test_ranks_match_the_same_devices_run_as_threads(tmp_path: Path, n: int) -> None:
    text = _program(n)
    inputs = _inputs(n)
    assert _finish(_start(tmp_path, text, inputs, "run", 60)) == [0] * n
    exe = load_artifact(compile_module(hlo.load(text)))
    want = run_devices(exe, inputs, n, 1, timeout_s=60)
    for rank in range(n):
        with np.load(tmp_path / f"out{rank}.npz", allow_pickle=False) as z:
            got = [z[f"arr_{k}"] for k in range(len(z.files))]
        assert len(got) == len(want[rank])
        for g, w in zip(got, want[rank]):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g, w)


def test_a_peer_that_dies_ends_the_collective_with_a_clear_error(tmp_path: Path) -> None:
    start = time.monotonic()
    assert _finish(_start(tmp_path, _program(2), _inputs(2), "die", 60)) == [2, 3]
    message = (tmp_path / "out0.txt").read_text()
    assert message.startswith("CollectiveError") and "over torch.distributed failed" in message
    assert time.monotonic() - start < 55  # the closed connection, not the 60 s timeout


def test_a_peer_that_hangs_ends_the_collective_at_the_timeout(tmp_path: Path) -> None:
    start = time.monotonic()
    procs = _start(tmp_path, _program(2), _inputs(2), "hang", 5)  # rank 1 sleeps for 600 s
    assert _finish(procs, wait_for=1) == [2]
    message = (tmp_path / "out0.txt").read_text()
    assert message.startswith("CollectiveTimeout") and "NEURON_RT_EXEC_TIMEOUT" in message, message
    assert time.monotonic() - start < 200


def test_different_programs_on_the_ranks_are_named(tmp_path: Path) -> None:
    """Rank 1 runs a module whose first collective is another instruction."""
    text = _program(2)
    assert _finish(_start(tmp_path, text, _inputs(2), "other", 60)) == [2, 2]
    for rank in range(2):  # call 1 is the send (scheduled first, and the same on both ranks); 2 is the all-reduce
        assert "mismatched collectives at call 2" in (tmp_path / f"out{rank}.txt").read_text()
