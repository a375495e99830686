"""NEURON_FRAMEWORK_DEBUG=1 with Neuron kernels: a graph compiled from torch_xla or JAX is dumped
into the working directory as protobuf text and HLO text, both readable, and the dump compiled
and run by the CLI (in a fresh process, without the kernel's Python source or a cached copy of
the C++ op's library) gives the in-process results."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format

import hlo
from hlo.schema import hlo_pb2
from neuron_customcall import backend
from neuron_customcall.cli import main
from tests.neuron_customcall.kernels.seed_kernels import nki_tensor_add

ROOT = Path(__file__).resolve().parents[3]
API_VERSIONS = {"jax": "API_VERSION_STATUS_RETURNING", "torch_xla": "API_VERSION_UNSPECIFIED"}
# Dumps are named after the graph as the framework names it (JAX: jit_<function>; torch_xla's own
# sync: SyncTensorsGraph.<n>), not after the lowering tool (PyLoweringContext.<n>): issue 17.
DUMP_NAMES = {"jax": r"jit__seed\.[0-9a-f]{12}", "torch_xla": r"SyncTensorsGraph\.\d+\.[0-9a-f]{12}"}


def _seed(a, b):
    return a * b * nki_tensor_add(a, b)


def _run_jax(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    import neuron_customcall.jax as nj

    return np.asarray(nj.jit(_seed)(a, b))


def _run_torch_xla(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    import torch
    import torch_xla

    from neuron_customcall.torch_xla import to_cpu

    device = torch_xla.device()
    return to_cpu(_seed(torch.from_numpy(a).to(device), torch.from_numpy(b).to(device))).numpy()


def _run_torch_xla_cpp(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A C++ (GpSimd) op in the graph: the dump carries the library itself."""
    import torch
    import torch_xla

    from neuron_customcall.torch_xla import to_cpu
    from tests.neuron_customcall.cpp import cpp_kernels

    cpp_kernels.load("relu")
    device = torch_xla.device()
    x, y = torch.from_numpy(a).to(device), torch.from_numpy(b).to(device)
    relu = torch.ops.relu_ops.relu_forward
    return to_cpu(relu(x) * relu(y) + x * y).numpy()


@pytest.mark.parametrize("framework, run", [("jax", _run_jax), ("torch_xla", _run_torch_xla),
                                            ("torch_xla", _run_torch_xla_cpp)],
                         ids=["jax-nki", "torch_xla-nki", "torch_xla-cpp"])
def test_dump_compiled_and_run_by_the_cli_matches_the_in_process_run(framework, run, tmp_path,
                                                                      monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NEURON_FRAMEWORK_DEBUG", "1")
    monkeypatch.delenv("NEURON_FRAMEWORK_DEBUG_DIR", raising=False)
    backend.clear_memo()  # a graph is dumped when this process first compiles it
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 256, 1024), dtype=np.float32)
    expected = run(a, b)
    reference = np.maximum(a, 0) * np.maximum(b, 0) + a * b if run is _run_torch_xla_cpp else a * b * (a + b)
    np.testing.assert_allclose(expected, reference, rtol=1e-6, atol=1e-6)

    (pbtxt,) = tmp_path.glob("*.pbtxt")
    (txt,) = tmp_path.glob("*.hlo.txt")
    assert re.fullmatch(DUMP_NAMES[framework] + r"\.pbtxt", pbtxt.name), pbtxt.name
    assert txt.name == pbtxt.name.removesuffix(".pbtxt") + ".hlo.txt"
    proto = text_format.Parse(pbtxt.read_text(), hlo_pb2.HloModuleProto())  # protobuf's reader
    calls = [i for c in proto.computations for i in c.instructions if i.opcode == "custom-call"]
    assert calls and {c.custom_call_target for c in calls} == {"AwsNeuronCustomNativeKernel"}
    assert {hlo_pb2.CustomCallApiVersion.Name(c.custom_call_api_version) for c in calls} == \
        {API_VERSIONS[framework]}
    text_calls = [i for i in hlo.load(txt).instructions() if i.opcode == "custom-call"]
    assert sorted(i.attributes.backend_config for i in text_calls) == sorted(c.backend_config for c in calls)

    neff, inputs, outputs = tmp_path / "seed.neff", tmp_path / "in.npz", tmp_path / "out.npz"
    assert main(["compile", str(pbtxt), "-o", str(neff), "--no-cache"]) == 0
    np.savez(inputs, a, b)  # both graphs are symmetric in a and b: parameter order does not matter
    fresh_tmp = tmp_path / "tmp"  # no GpSimd library cached yet: the artifact's own copy runs
    fresh_tmp.mkdir()
    done = subprocess.run([sys.executable, "-m", "neuron_customcall", "run", str(neff),
                           "--inputs", str(inputs), "--outputs", str(outputs)],
                          cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "TMPDIR": str(fresh_tmp)})
    assert done.returncode == 0, done.stderr
    with np.load(outputs) as npz:
        (got,) = [npz[k] for k in npz.files]
    np.testing.assert_array_equal(got, expected.reshape(got.shape))
