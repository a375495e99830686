"""A C++ kernel that crashes inside a torch_xla graph on PJRT_DEVICE=NEURON (issue 11): the
process lives on, the framework's own error carries our message (program, kernel, the crash) and
the line of the user's script that called the kernel, and the next graph runs. Fresh processes:
the suite's own runs PJRT_DEVICE=CPU."""
from __future__ import annotations

import json

import pytest

from tests.sdk.subproc import check, run_python

SCRIPT = """
import json, sys
sys.path.insert(0, "tests/emulator/gpsimd")
import torch, torch_xla
import torch_xla.core.xla_model as xm
from gpsimd_kernels import library
from neuron_customcall import custom_op

custom_op.load_library(library("error_ops"))
dev = torch_xla.device()
x = torch.arange(16, dtype=torch.float32).to(dev)

def user_step(t):
    return torch.ops.error_ops.segfault(t) * 2  # USER LINE

try:
    y = user_step(x)
    xm.mark_step()
    print(y.cpu())
    message = None
except Exception as e:
    message = f"{type(e).__name__}: {e}"
after = (x + 1).cpu().tolist()
line = next(k for k, text in enumerate(open(__file__), 1) if text.rstrip().endswith("# USER LINE"))
print("RESULT " + json.dumps({"message": message, "after": after, "line": line}))
"""


@pytest.mark.parametrize("debug", [True, False], ids=["with_source_lines", "without"])
def test_a_crashing_cpp_kernel_in_a_graph_is_the_frameworks_error_and_the_process_goes_on(tmp_path, debug):
    script = tmp_path / "crash_step.py"
    script.write_text(SCRIPT)
    env = {"PJRT_DEVICE": "NEURON"}
    if debug:
        env.update(XLA_IR_DEBUG="1", XLA_HLO_DEBUG="1")
    out = check(run_python([str(script)], env=env, drop=("XLA_IR_DEBUG", "XLA_HLO_DEBUG")))
    got = json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[len("RESULT "):])
    message = got["message"]
    assert message is not None and message.startswith("RuntimeError: "), message
    assert "failed on the neuron device" in message and "kernel error_ops::segfault" in message, message
    assert "op 'segfault' crashed" in message and "SIGSEGV" in message, message
    if debug:  # the user's line, not the adapter's frame that made the custom-call
        assert f"(at {script}:{got['line']} " in message, message
    else:  # torch_xla records no lines: none is made up
        assert "(at " not in message, message
    assert got["after"] == [float(i) for i in range(1, 17)]
