"""Through torch.ops: a shape function or a static initialiser that crashes is a Python exception
naming the op or the library, never a dead host; shape calls reach the worker once per signature."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from cpp_kernels import BUILD_ROOT, load
from emulator.gpsimd import LibraryError, ShapeFunctionError
from emulator.gpsimd.errors import ShapeFunctionCrash
from neuron_customcall import custom_op
from neuron_customcall.cpp import loader

GPSIMD_KERNELS = Path(__file__).resolve().parents[2] / "emulator" / "gpsimd" / "kernels"


def load_shape_errors() -> None:
    custom_op.load("shape_errors", [GPSIMD_KERNELS / "shape_errors.cpp"],
                   [GPSIMD_KERNELS / "shape_errors_shape.cpp"], build_directory=BUILD_ROOT / "shape_errors")


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_a_crashing_shape_function_raises_and_the_next_op_works(device: str) -> None:
    load_shape_errors()
    x = torch.arange(16, dtype=torch.float32, device=device)
    with pytest.raises(ShapeFunctionCrash, match="shape function of op 'segv' .* crashed its GpSimd worker \\(SIGSEGV\\)"):
        torch.ops.shape_errors.segv(x)
    with pytest.raises(ShapeFunctionError, match="no shape for you"):
        torch.ops.shape_errors.throws(x)
    y = torch.ops.shape_errors.good(x)
    assert y.shape == x.shape and y.device == x.device
    if device == "cpu":
        assert torch.equal(y, x)


def test_a_crashing_static_initialiser_fails_the_load_not_the_host(tmp_path: Path) -> None:
    with pytest.raises(LibraryError, match="libinit_crash.so crashed while loading \\(SIGSEGV\\)"):
        custom_op.load("init_crash", [GPSIMD_KERNELS / "init_crash.cpp"], [GPSIMD_KERNELS / "init_crash_shape.cpp"],
                       build_directory=tmp_path, extra_cflags=["-DINIT_SEGV"])
    load("relu")
    assert torch.equal(torch.ops.relu_ops.relu_forward(torch.tensor([[-1.0, 2.0]])), torch.tensor([[0.0, 2.0]]))


def test_shape_calls_reach_the_worker_once_per_signature() -> None:
    load("relu")
    requests = loader.get("relu_ops").runner.requests
    x = torch.randn(41, 43)
    before = requests["shape"]
    for _ in range(3):
        torch.ops.relu_ops.relu_forward(x)
    torch.ops.relu_ops.relu_forward(x.to("meta"))
    compiled = torch.compile(lambda t: torch.ops.relu_ops.relu_forward(t) * 2, backend="eager", fullgraph=True)
    assert torch.equal(compiled(x), torch.relu(x) * 2)
    assert requests["shape"] == before + 1
