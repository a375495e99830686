"""Two processes of two devices each: an all-reduce over every device of the world folds each
process's own devices first and reduces the folds with gloo's all_reduce once per process
(GlooCommunicator._reduce_local_first); every device's result equals the four devices run as
threads of one process (integers exactly, floats within rounding: XLA leaves the order open),
and a sub-group all-reduce stays on the chunked path."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import hlo
from emulator import load_artifact
from emulator.collectives import run_devices
from neuron_customcall.compiler import compile_module
from tests.neuron_customcall.distributed import ranks

ROOT = Path(__file__).resolve().parents[3]
WORKER = Path(__file__).with_name("local_first_worker.py")

PROGRAM = """HloModule local_first, replica_count=4
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
max {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT r = s32[] maximum(a, b)
}
xor {
  a = u8[] parameter(0)
  b = u8[] parameter(1)
  ROOT r = u8[] xor(a, b)
}
ENTRY e {
  f = f32[1000] parameter(0)
  i = s32[300] parameter(1)
  u = u8[70] parameter(2)
  f_all = f32[1000] all-reduce(f), replica_groups={}, to_apply=add
  i_all = s32[300] all-reduce(i), replica_groups={{0,1,2,3}}, to_apply=max
  u_all = u8[70] all-reduce(u), replica_groups={}, to_apply=xor
  f_sub = f32[1000] all-reduce(f), replica_groups={{0,2},{1,3}}, to_apply=add
  ROOT t = (f32[1000], s32[300], u8[70], f32[1000]) tuple(f_all, i_all, u_all, f_sub)
}"""


def test_processes_of_two_devices_fold_locally_then_reduce_once_over_gloo(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    inputs = [[rng.standard_normal(1000).astype(np.float32), rng.integers(-2**31, 2**31, 300).astype(np.int32),
               rng.integers(0, 256, 70).astype(np.uint8)] for _ in range(4)]
    (tmp_path / "m.hlo").write_text(PROGRAM)
    np.savez(tmp_path / "in.npz", **{f"d{d}_{k}": a for d, ins in enumerate(inputs) for k, a in enumerate(ins)})
    port = ranks.free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    procs = [subprocess.Popen([sys.executable, str(WORKER), str(rank), str(port), str(tmp_path / "m.hlo"),
                               str(tmp_path / "in.npz"), str(tmp_path / "out")], env=env, cwd=str(ROOT),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for rank in (0, 1)]
    try:
        logs = [p.communicate(timeout=300)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0], "\n".join(log[-3000:] for log in logs)
    want = run_devices(load_artifact(compile_module(hlo.load(PROGRAM))), inputs, 4, 1, timeout_s=60)
    for rank in (0, 1):
        # each run: the three all-reduces over every device, by the process's first device only
        assert json.loads((tmp_path / f"out{rank}.calls.json").read_text()) == \
            [[2 * rank, "add"], [2 * rank, "maximum"], [2 * rank, "xor"]] * 2
        for run in (1, 2):
            with np.load(tmp_path / f"out{rank}.run{run}.npz", allow_pickle=False) as z:
                for d in (2 * rank, 2 * rank + 1):
                    got = [z[f"d{d}_{k}"] for k in range(4)]
                    np.testing.assert_allclose(got[0], want[d][0], rtol=1e-6, atol=1e-6)
                    np.testing.assert_array_equal(got[1], want[d][1])
                    np.testing.assert_array_equal(got[2], want[d][2])
                    np.testing.assert_array_equal(got[3], want[d][3])  # two members: the group-order fold
