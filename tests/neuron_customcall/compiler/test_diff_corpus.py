"""Every graph of the framework corpus (tests/hlo/framework_modules.py + framework_corpus.py: live
JAX and torch_xla modules) through our backend and through XLA:CPU (jaxlib) on the same proto and
the same random inputs. Graphs holding Neuron custom-calls with placeholder configs are checked to
be compile errors."""
from __future__ import annotations

import numpy as np
import pytest

import hlo
from emulator.program.dtypes import DTYPES
from neuron_customcall.compiler import compile_module
from tests.hlo import framework_corpus  # noqa: F401 - registers the corpus
from tests.hlo import framework_modules as fm
from tests.neuron_customcall.compiler.ours import assert_close, compile_proto

WITH_KERNELS = {"jax/custom_call", "torch_xla/custom_call"}
# XLA:CPU allows excess precision: it drops the bf16 rounding of a dot whose result is converted
# straight back to f32; the emulator rounds as the HLO says. Compare such graphs at bf16 tolerance.
TOLERANCE = {"jax/matmul_bf16": 2e-2}


def _inputs(manifest: dict, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for e in manifest["inputs"]:
        dt = DTYPES[e["dtype"]]
        shape = e["shape"]
        if dt == np.bool_:
            out.append(rng.random(shape) < 0.5)
        elif dt.kind in "iu":
            out.append(rng.integers(0, 5, size=shape).astype(dt))
        else:
            out.append(rng.standard_normal(shape).astype(dt))
    return out


@pytest.mark.parametrize("name", [n for n in fm.names() if n not in WITH_KERNELS])
def test_corpus_graph_matches_xla_cpu(name):
    from neuron_customcall.jax.xla_cpu import XlaCpuExecutable

    proto = fm.serialized(name)
    exe = compile_proto(proto)
    inputs = _inputs(exe.manifest)
    ref = XlaCpuExecutable(proto).run(inputs)
    tol = TOLERANCE.get(name, 1e-4)
    assert_close(exe.run(inputs), [np.asarray(r) for r in ref], rtol=tol, atol=tol)


@pytest.mark.parametrize("name", sorted(WITH_KERNELS))
def test_neuron_custom_calls_without_a_kernel_descriptor_are_compile_errors(name):
    """These corpus graphs carry placeholder backend_configs, not kernel descriptors (running real
    kernels: tests/neuron_customcall/kernels, torch_xla and jax)."""
    from neuron_customcall.compiler import CompileError

    with pytest.raises(CompileError, match="custom-call instruction .*invalid kernel descriptor"):
        compile_module(hlo.load(fm.serialized(name)))
