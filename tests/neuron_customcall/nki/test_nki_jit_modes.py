"""nki.jit(mode=...) takes the modes the NKI references document (beta 1: jax, torchxla,
baremetal, benchmark, simulation, auto; beta 2: jax, torchxla, auto; NKI 0.1.0's trace for
sub-kernels) and refuses any other value naming the valid ones (issue 17: "simulaton" was
accepted silently)."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

from neuron_customcall.nki import language as nl

DOCUMENTED = ("auto", "jax", "torchxla", "baremetal", "benchmark", "simulation", "trace")
# Beta 2's `nki.jit` is this same function (tests/sdk/test_sdk_names.py); `import nki` here could
# find tests/neuron_customcall/nki as a namespace package once pytest put tests/neuron_customcall
# on sys.path.
NAMESPACES = ("neuron_customcall.nki", "neuronxcc.nki")


def _double(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i, j = nl.arange(a.shape[0])[:, None], nl.arange(a.shape[1])[None, :]
    nl.store(out[i, j], value=nl.load(a[i, j]) * 2.0)
    return out


@pytest.mark.parametrize("namespace", NAMESPACES)
@pytest.mark.parametrize("mode", DOCUMENTED)
def test_documented_modes_are_accepted_and_run(namespace: str, mode: str) -> None:
    jit = importlib.import_module(namespace).jit
    kernel = jit(mode=mode)(_double)
    assert kernel.mode == mode
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(kernel(x), 2 * x)


@pytest.mark.parametrize("namespace", NAMESPACES)
@pytest.mark.parametrize("mode, hint", [("simulaton", "did you mean 'simulation'?"),
                                        ("torch_xla", "did you mean 'torchxla'?"),
                                        ("cuda", "the documented modes are 'auto', 'baremetal'"),
                                        (None, "the documented modes are")])
def test_other_modes_are_refused_naming_the_valid_ones(namespace: str, mode, hint: str) -> None:
    jit = importlib.import_module(namespace).jit
    with pytest.raises(ValueError, match=r"nki\.jit: unknown mode") as e:
        jit(mode=mode)(_double)
    assert hint in str(e.value) and "'simulation'" in str(e.value)
    with pytest.raises(ValueError, match="unknown mode"):
        jit(_double, mode=mode)


def test_trace_kernel_takes_a_jit_kernel_or_a_launch() -> None:
    """nki.trace_kernel on what users hold (issue 17: a jit kernel raised inspect's TypeError)."""
    from emulator.kernel_ir import format_kernel
    from neuron_customcall.nki import jit, trace_kernel

    kernel = jit(_double)
    x = np.zeros((4, 3), np.float32)
    plain = format_kernel(trace_kernel(_double, [x]).ir)
    assert format_kernel(trace_kernel(kernel, [x]).ir) == plain
    assert "kernel _double grid=[1]" in plain and "tensor_scalar" in plain
    assert trace_kernel(kernel[2, 3], [x]).ir.grid == (2, 3)
    assert trace_kernel(kernel[2, 3], [x], grid=(5,)).ir.grid == (5,)
