"""Programs as people write them, unchanged (only the data source differs), on
``PJRT_DEVICE=NEURON`` in a fresh process each, checked against the CPU: the seed NKI program,
the C++ ReLU training and inference tutorials, a 20-step loop with a C++ and an NKI op against
torch_xla on PJRT_DEVICE=CPU, and the rest of what training scripts touch (device_surface.py)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from tests.sdk.subproc import PROGRAMS, ROOT, check, run_python

NEURON = {"PJRT_DEVICE": "NEURON"}
CPU = {"PJRT_DEVICE": "CPU"}
TUTORIAL = PROGRAMS / "customop_mlp"


def test_torch_xla_registers_our_plugin_for_neuron():
    code = ("import torch_xla, torch_xla._internal.neuron as n, torch_xla.runtime as xr\n"
            "from torch_xla.experimental import plugins\n"
            "from neuron_customcall.pjrt.torch_xla_plugin import NeuronPlugin\n"
            "assert n.NeuronPlugin is NeuronPlugin and isinstance(plugins.default(), NeuronPlugin)\n"
            "print(xr.device_type(), torch_xla.device(), xr.global_runtime_device_count() >= 1)\n")
    assert check(run_python(["-c", code], env=NEURON)).split() == ["NEURON", "xla:0", "True"]


def test_the_seed_nki_program_prints_its_result_and_matches_the_cpu():
    out = check(run_python(["nki_framework_custom_op_torch.py"], cwd=PROGRAMS, env=NEURON))
    assert "device='xla:0'" in out and "matches the CPU: True" in out


@pytest.mark.parametrize("device, args, steps", [(NEURON, [], 10), (CPU, ["--no-kernels"], 7)],
                         ids=["neuron", "xla-cpu"])
def test_what_training_scripts_touch_works_on_the_device(device, args, steps):
    out = check(run_python(["device_surface.py", *args], cwd=PROGRAMS, env=device))
    assert out.splitlines()[-1] == "done" and out.count("ok ") == steps, out


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory) -> tuple[Path, Path]:
    """The tutorial's folder with librelu.so built by its build.py, and the reference run's folder
    (the same scripts with cpu_ops/my_ops.py: torch's ReLU)."""
    neuron, ref = tmp_path_factory.mktemp("customop_mlp"), tmp_path_factory.mktemp("customop_mlp_cpu")
    for source in TUTORIAL.glob("*.py"):
        shutil.copy(source, neuron)
        if source.name not in ("my_ops.py", "build.py"):
            shutil.copy(source, ref)
    shutil.copy(TUTORIAL / "cpu_ops" / "my_ops.py", ref)
    for source in ("relu.cpp", "shape.cpp"):
        shutil.copy(ROOT / "examples" / "mlp_training" / source, neuron)
    check(run_python(["build.py"], cwd=neuron))
    assert (neuron / "librelu.so").exists()
    return neuron, ref


def _close(a: dict, b: dict, tol: float) -> None:
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=tol, atol=tol, msg=k)


def test_the_training_tutorial_trains_as_on_the_cpu(tutorial):
    neuron, ref = tutorial
    out = check(run_python(["train.py"], cwd=neuron, env=NEURON))
    expected = check(run_python(["train.py"], cwd=ref, env=CPU))
    final = [line for line in out.splitlines() if line.startswith("Final loss is")]
    assert final and final == [line for line in expected.splitlines() if line.startswith("Final loss is")]
    _close(torch.load(neuron / "checkpoints" / "checkpoint.pt")["state_dict"],
           torch.load(ref / "checkpoints" / "checkpoint.pt")["state_dict"], 1e-5)


def test_the_performance_tutorials_inference_matches_the_cpu(tutorial):
    neuron, ref = tutorial
    layers = {"MLP_LAYERS": "4096,2048"}
    out = check(run_python(["inference.py"], cwd=neuron, env=NEURON | layers))
    check(run_python(["inference.py"], cwd=ref, env=CPU | layers))
    assert "Inf throughput (iter/sec):" in out
    _close(torch.load(neuron / "output.pt"), torch.load(ref / "output.pt"), 1e-4)


def test_a_20_step_loop_with_a_cpp_and_an_nki_op_matches_torch_xla_on_cpu(tutorial):
    neuron, ref = tutorial
    check(run_python(["train_cpp_nki.py", str(neuron / "run.pt")], cwd=neuron, env=NEURON))
    check(run_python(["train_cpp_nki.py", str(ref / "run.pt"), "--reference"], cwd=ref, env=CPU))
    ours, theirs = torch.load(neuron / "run.pt"), torch.load(ref / "run.pt")
    assert len(ours["losses"]) == 20 and ours["losses"][-1] < ours["losses"][0]
    _close({"losses": ours["losses"]}, {"losses": theirs["losses"]}, 1e-5)
    _close(ours["state_dict"], theirs["state_dict"], 1e-5)


CONVENIENCES = """
import torch, torch_xla
from neuron_customcall.torch_xla import lazy, mark_step, to_cpu

def refuse(*args, **kwargs):
    raise AssertionError("the direct path ran on the neuron device")

lazy.execute = lazy.live_tensors = refuse
dev = torch_xla.device()
w = torch.arange(12.0).reshape(3, 4).to(dev)
y = w * 2 + 1
assert mark_step(y) == 1 and mark_step() == 0
z = y.sum()
assert to_cpu(z).item() == float((torch.arange(12.0) * 2 + 1).sum())
print("ok")
"""


def test_mark_step_and_to_cpu_are_torch_xlas_own_on_the_device():
    assert check(run_python(["-c", CONVENIENCES], env=NEURON)).strip() == "ok"
