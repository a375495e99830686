"""A Neuron kernel on torch_xla's CPU device (PJRT_DEVICE=CPU): a sync raises an error naming the
kernel and PJRT_DEVICE=NEURON instead of XLA:CPU's "Unknown custom-call API version enum value: 0";
a read that ends the program adds the same explanation after the traceback; our own mark_step
still runs the graph on the emulator. Each case in a fresh PJRT_DEVICE=CPU process."""
from __future__ import annotations

import json

from tests.sdk.subproc import PROGRAMS, check, run_python

CPU = {"PJRT_DEVICE": "CPU"}

SYNC = """
import json, sys
import torch, torch_xla
import torch_xla.core.xla_model as xm
from spmd_tensor_addition_nki_kernels import nki_tensor_add

device = torch_xla.device()
a, b = torch.ones(256, 1024).to(device), torch.ones(256, 1024).to(device)
c = nki_tensor_add(a, b) * a
try:
    getattr(xm, sys.argv[1])() if sys.argv[1] == "mark_step" else torch_xla.sync()
    report = {"raised": None}
except Exception as e:
    report = {"raised": type(e).__name__, "message": str(e), "cause": str(e.__cause__)}
print("RESULT " + json.dumps(report))
"""

DIRECT = """
import torch, torch_xla
import neuron_customcall.torch_xla as nt
from spmd_tensor_addition_nki_kernels import nki_tensor_add

device = torch_xla.device()
a, b = torch.ones(256, 1024).to(device), torch.full((256, 1024), 2.0).to(device)
c = nki_tensor_add(a, b) * b
nt.mark_step(c)
print("RESULT", float(nt.to_cpu(c).sum()))
"""


def _result(out: str) -> dict:
    return json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[7:])


def test_a_sync_names_the_kernel_and_the_device_to_use():
    for sync in ("mark_step", "sync"):
        got = _result(check(run_python(["-c", SYNC, sync], cwd=PROGRAMS, env=CPU)))
        assert got["raised"] == "NeuronKernelOnCpuDeviceError", got
        assert "'nki_tensor_add_kernel_'" in got["message"] and "PJRT_DEVICE=NEURON" in got["message"]
        assert "Unknown custom-call API version enum value: 0" in got["cause"]


def test_a_read_that_ends_the_program_is_explained_after_the_traceback():
    done = run_python(["nki_framework_custom_op_torch.py"], cwd=PROGRAMS, env=CPU)
    assert done.returncode != 0
    tail = done.stderr.rstrip().splitlines()[-1]
    assert tail.startswith("NeuronKernelOnCpuDeviceError: ") and "'nki_tensor_add_kernel_'" in tail
    assert "PJRT_DEVICE=NEURON" in tail and "Unknown custom-call API version" in done.stderr


def test_our_mark_step_still_runs_the_graph_on_the_cpu_device():
    done = run_python(["-c", DIRECT], cwd=PROGRAMS, env=CPU)
    assert check(done).splitlines()[-1] == f"RESULT {256 * 1024 * 6.0}"
    # The first kernel on the CPU device is announced at once, before any read could abort.
    warned = [ln for ln in done.stderr.splitlines() if "called on torch_xla's CPU device" in ln]
    assert len(warned) == 1 and "'nki_tensor_add_kernel_'" in warned[0], done.stderr
    assert "PJRT_DEVICE=NEURON" in warned[0]



READS = """
import sys
import torch, torch_xla
from spmd_tensor_addition_nki_kernels import nki_tensor_add

device = torch_xla.device()
a, b = torch.ones(256, 1024).to(device), torch.ones(256, 1024).to(device)
c = nki_tensor_add(a, b)
read = {"allclose": lambda: torch.allclose(a + b, c), "cpu": lambda: c.cpu(),
        "print": lambda: print(c)}[sys.argv[1]]
try:
    read()
    print("RESULT no error")
except RuntimeError as e:
    print("RESULT RuntimeError", "Unknown custom-call API version" in str(e))
"""


def test_the_documented_flag_turns_the_xla_cpu_abort_into_an_error():
    """troubleshooting.md: a read that compiles from C++ (torch.allclose, as AWS's matmul
    tutorial checks its result; .cpu(); print) of a kernel's result on the CPU device can abort
    the interpreter inside XLA:CPU's fusion emitters; with them off it is a RuntimeError the
    program can catch."""
    flags = {**CPU, "XLA_FLAGS": "--xla_cpu_use_fusion_emitters=false"}
    for read in ("allclose", "cpu", "print"):
        out = check(run_python(["-c", READS, read], cwd=PROGRAMS, env=flags))
        assert out.splitlines()[-1] == "RESULT RuntimeError True", (read, out)
