"""`inspect` and `profile` name each kernel as its author wrote it (the NKI kernel's function,
``library::op`` of a C++ op), not by the framework's instruction name (``custom-call.17``), and
`inspect --kernels` prints what each kernel is (issue 17)."""
from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import pytest

import hlo
from neuron_customcall.cli import main
from neuron_customcall.compiler import compile_module


@pytest.fixture(scope="module")
def neff(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import neuron_customcall.jax as ncj
    from neuron_customcall.jax import cpp_call
    from tests.neuron_customcall.cpp import cpp_kernels
    from tests.neuron_customcall.kernels.seed_kernels import nki_tensor_add

    cpp_kernels.load("relu")

    def step(a, b):
        return cpp_call("relu_ops::relu_forward", nki_tensor_add(a, b)) * 2.0

    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((256, 1024)).astype(np.float32) for _ in range(2))
    proto = ncj.jit(step).lower(a, b).compiler_ir("hlo").as_serialized_hlo_module_proto()
    path = tmp_path_factory.mktemp("names") / "step.neff"
    path.write_bytes(compile_module(hlo.load(proto)))
    return path


def test_inspect_lists_kernels_by_name(neff: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["inspect", str(neff)]) == 0
    out = capsys.readouterr().out
    kernels = out.split("kernels: 3\n")[1].splitlines()
    assert [line.split(" (")[0].strip() for line in kernels] == [
        "nki_tensor_add_kernel_", "relu_ops", "relu_ops::relu_forward"]
    assert "NATIVE CODE: YES" in out and "relu_ops::relu_forward (gpsimd-op" in out
    assert "kernels" not in out.split("kernels: 3")[1]  # no IR without --kernels


def test_inspect_kernels_prints_the_nki_ir_and_the_cpp_signature(neff: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["inspect", str(neff), "--kernels"]) == 0
    out = capsys.readouterr().out
    nki = out.split("--- kernel 0: nki_tensor_add_kernel_ (nki-ir")[1].split("--- kernel 1")[0]
    assert "kernel nki_tensor_add_kernel_ grid=[2, 2]" in nki
    assert "= load " in nki and "store " in nki and "tensor_tensor op=add" in nki
    assert "seed_kernels.py:" in nki  # source lines of the kernel
    assert "C++ library relu_ops:" in out
    assert "C++ op relu_ops::relu_forward(tensor) -> float32[256, 1024]" in out


def test_profile_names_kernels(neff: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    trace = tmp_path / "t.json"
    assert main(["profile", str(neff), "-o", str(trace)]) == 0
    table = capsys.readouterr().out.split("instructions by estimated cycles:\n")[1]
    rows = {line.split(" (")[0] for line in table.splitlines()[1:] if " (" in line}
    assert {"relu_ops::relu_forward", "nki_tensor_add_kernel_"} <= rows
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X" and e["cat"] != "host"]
    kernel_events = {e["name"].split(" (")[0] for e in events if e["args"]["op"] == "kernel"}
    assert kernel_events == {"relu_ops::relu_forward", "nki_tensor_add_kernel_"}
    assert all(e["name"].endswith(")") for e in events if e["args"]["op"] == "kernel")  # the instruction too
