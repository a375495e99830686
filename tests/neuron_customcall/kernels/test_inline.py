"""The backend inlines Neuron kernel custom-calls: NKI IR and GpSimd calls run inside the compiled
artifact, which needs neither the kernel's Python source nor the user's library file; every
mismatch between descriptor and HLO is a compile error naming the instruction."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import hlo
from emulator import load_artifact
from emulator.gpsimd.args import TensorSpec as GpSimdSpec
from emulator.gpsimd.runner import runner_for
from neuron_customcall import custom_op
from neuron_customcall.compiler import CompileError, compile_module
from neuron_customcall.cpp import loader
from neuron_customcall.kernels import build
from neuron_customcall.kernels.descriptor import KernelDescriptor, TensorSig, decode, encode
from neuron_customcall.nki import TensorSpec
from tests.neuron_customcall.cpp import cpp_kernels
from tests.neuron_customcall.kernels.seed_kernels import nki_tensor_add_kernel_, scale_and_shift

ROOT = Path(__file__).resolve().parents[3]
rng = np.random.default_rng(0)
F32 = "float32"


def _module(config: str, params: list[str], result: str, root: str = "") -> hlo.HloModule:
    decls = "\n".join(f"  p{k} = {t} parameter({k})" for k, t in enumerate(params))
    operands = ", ".join(f"p{k}" for k in range(len(params)))
    call = (f'  {"" if root else "ROOT "}kc = {result} custom-call({operands}), '
            f'custom_call_target="AwsNeuronCustomNativeKernel", backend_config="{config}"')
    return hlo.load(f"HloModule m\nENTRY e {{\n{decls}\n{call}\n{root}\n}}")


def _add_config() -> str:
    return build.nki_call(nki_tensor_add_kernel_, (2, 2), [TensorSpec((256, 1024), F32)] * 2).config


def test_nki_kernel_inlined_and_run_with_the_rest_of_the_graph():
    module = _module(_add_config(), ["f32[256,1024]"] * 2, "f32[256,1024]",
                     "  ROOT out = f32[256,1024] multiply(kc, p0)")
    exe = load_artifact(compile_module(module))
    assert [k.kind for k in exe.artifact.kernels] == ["nki-ir"]
    a, b = rng.standard_normal((2, 256, 1024), dtype=np.float32)
    (out,) = exe.run([a, b])
    np.testing.assert_array_equal(out, (a + b) * a)


def test_nki_kernel_with_two_outputs_and_a_static_argument():
    call = build.nki_call(scale_and_shift, (1,), [TensorSpec((128, 64), F32), 2.0, 1.0])
    module = _module(call.config, ["f32[128,64]"], "(f32[128,64], f32[128,64])")
    x = rng.standard_normal((128, 64), dtype=np.float32)
    y, z = load_artifact(compile_module(module)).run([x])
    np.testing.assert_allclose(y, 2 * x)
    np.testing.assert_allclose(z, x + 1)


def test_the_artifact_runs_without_the_kernel_source_or_neuron_customcall(tmp_path):
    module = _module(_add_config(), ["f32[256,1024]"] * 2, "f32[256,1024]")
    path = tmp_path / "add.neff"
    path.write_bytes(compile_module(module))
    script = textwrap.dedent(f"""
        import sys, numpy as np, emulator
        exe = emulator.load_artifact({str(path)!r})
        a = np.ones((256, 1024), np.float32)
        (out,) = exe.run([a, 2 * a])
        assert (out == 3).all()
        assert not any(m.startswith(("neuron_customcall", "tests")) for m in sys.modules)
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.stdout.strip() == "ok", done.stderr


def test_gpsimd_op_inlined_with_its_library():
    lib = cpp_kernels.load("relu")
    op = custom_op.descriptor("relu_ops").op("relu_forward")
    spec = GpSimdSpec("float32", (16, 32))
    config = build.gpsimd_config(op, custom_op.library_path("relu_ops"), [spec], spec)
    module = _module(config, ["f32[16,32]"], "f32[16,32]", "  ROOT out = f32[16,32] add(kc, p0)")
    artifact = compile_module(module)
    exe = load_artifact(artifact)
    assert [k.kind for k in exe.artifact.kernels] == ["gpsimd-library", "gpsimd-op"]
    # The artifact's own copy of the library runs, on the one runner of that library content:
    # the worker torch calls use (one registry, one call path).
    runner = loader.get("relu_ops").runner
    assert runner_for(exe.artifact.kernels[0].data) is runner
    before = runner.requests["call"]  # a graph's custom-call is a prepared call (emulator/gpsimd/control.py)
    x = rng.standard_normal((16, 32), dtype=np.float32)
    (out,) = exe.run([x])
    np.testing.assert_array_equal(out, np.maximum(x, 0) + x)
    assert runner.requests["call"] == before + 1
    assert lib.exists()


def test_ops_of_one_library_share_one_library_payload():
    cpp_kernels.load("relu")
    desc, path = custom_op.descriptor("relu_ops"), custom_op.library_path("relu_ops")
    spec = GpSimdSpec("float32", (8, 4))
    forward = build.gpsimd_config(desc.op("relu_forward"), path, [spec], spec)
    tcm = build.gpsimd_config(desc.op("relu_tcm"), path, [spec], spec)
    backward = build.gpsimd_config(desc.op("relu_backward"), path, [spec, spec], spec)
    call = 'custom_call_target="AwsNeuronCustomNativeKernel"'
    module = hlo.load(
        "HloModule m\nENTRY e {\n  p0 = f32[8,4] parameter(0)\n  p1 = f32[8,4] parameter(1)\n"
        f'  f = f32[8,4] custom-call(p0), {call}, backend_config="{forward}"\n'
        f'  t = f32[8,4] custom-call(p1), {call}, backend_config="{tcm}"\n'
        f'  b = f32[8,4] custom-call(p1, p0), {call}, backend_config="{backward}"\n'
        "  s = f32[8,4] add(f, t)\n  ROOT out = f32[8,4] add(s, b)\n}")
    artifact = compile_module(module)
    exe = load_artifact(artifact)
    kinds = [k.kind for k in exe.artifact.kernels]
    assert kinds.count("gpsimd-library") == 1 and kinds.count("gpsimd-op") == 3
    image = path.read_bytes()
    assert len(artifact) < len(image) + 64 * 1024  # one copy, not three
    x, g = rng.standard_normal((2, 8, 4), dtype=np.float32)
    (out,) = exe.run([x, g])
    np.testing.assert_allclose(out, np.maximum(x, 0) + np.maximum(g, 0) + np.where(x > 0, g, 0), rtol=1e-6)


def _with(config: str, **changes) -> str:
    desc = decode(config)
    return encode(KernelDescriptor(**{**desc.__dict__, **changes}))


@pytest.mark.parametrize("params, result, config, message", [
    (["f32[256,1024]"] * 2, "f32[256,1024]", "e30=", "invalid kernel descriptor in backend_config"),
    (["f32[256,1024]"], "f32[256,1024]", None, "takes 2 inputs, the custom-call has 1 operands"),
    (["f32[256,1024]", "f32[256,512]"], "f32[256,1024]", None, "operand 1 is f32\\[256,512\\]"),
    (["f32[256,1024]", "bf16[256,1024]"], "f32[256,1024]", None, "operand 1 is bf16"),
    (["f32[256,1024]"] * 2, "f16[256,1024]", None, "result f16\\[256,1024\\]"),
    (["f32[256,1024]"] * 2, "(f32[256,1024], f32[256,1024])", None, "disagrees with the kernel"),
])
def test_mismatches_are_compile_errors_naming_the_instruction(params, result, config, message):
    module = _module(config or _add_config(), params, result)
    with pytest.raises(CompileError, match=message) as err:
        compile_module(module)
    assert "custom-call instruction 'kc'" in str(err.value)


def test_a_descriptor_that_lies_about_its_ir_is_a_compile_error():
    lying = _with(_add_config(), grid=(1, 1))
    with pytest.raises(CompileError, match="disagrees with its kernel IR"):
        compile_module(_module(lying, ["f32[256,1024]"] * 2, "f32[256,1024]"))
    renamed = _with(_add_config(), inputs=(TensorSig("x", (256, 1024), "f32"),
                                           TensorSig("y", (256, 1024), "f32")))
    with pytest.raises(CompileError, match="disagrees with its kernel IR"):
        compile_module(_module(renamed, ["f32[256,1024]"] * 2, "f32[256,1024]"))
    garbage = _with(_add_config(), payload=b"garbage")
    with pytest.raises(CompileError, match="not kernel IR"):
        compile_module(_module(garbage, ["f32[256,1024]"] * 2, "f32[256,1024]"))


def test_unknown_custom_call_target_is_a_compile_error():
    module = hlo.load('HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n'
                      '  ROOT c = f32[4] custom-call(p), custom_call_target="MyKernel"\n}')
    with pytest.raises(CompileError, match="custom-call instruction 'c'.*target 'MyKernel' is not supported"):
        compile_module(module)


def test_invalid_gpsimd_descriptors_are_compile_errors():
    from neuron_customcall.kernels.descriptor import Argument

    op = {"name": "relu_forward", "args": ["tensor"]}  # lacks the index, symbol, ...
    desc = KernelDescriptor(kind="gpsimd", name="relu_ops::relu_forward", payload=b"\x7fELF",
                            inputs=(TensorSig("a0", (4, 4), "f32"),),
                            outputs=(TensorSig("out", (4, 4), "f32"),), op=op,
                            arguments=(Argument("tensor"),))
    with pytest.raises(CompileError, match="invalid GpSimd op"):
        compile_module(_module(encode(desc), ["f32[4,4]"], "f32[4,4]"))
    full = {"library": "relu_ops", "name": "relu_forward", "index": 0, "compute": "relu_forward",
            "symbol": "relu_forward", "args": ["tensor"], "multicore": False, "stack_size": 0}
    pred = KernelDescriptor(**{**desc.__dict__, "op": full,
                               "outputs": (TensorSig("out", (4, 4), "pred"),)})
    with pytest.raises(CompileError, match="invalid GpSimd op.*pred"):
        compile_module(_module(encode(pred), ["f32[4,4]"], "pred[4,4]"))


def test_a_kernel_called_twice_is_stored_and_prepared_once():
    config = _add_config()
    decls = "\n".join(f"  p{k} = f32[256,1024] parameter({k})" for k in range(2))
    calls = "\n".join(
        f'  c{k} = f32[256,1024] custom-call({ops}), custom_call_target="AwsNeuronCustomNativeKernel", '
        f'backend_config="{config}"' for k, ops in enumerate(["p0, p1", "p1, p1"]))
    module = hlo.load(f"HloModule m\nENTRY e {{\n{decls}\n{calls}\n"
                      "  ROOT out = f32[256,1024] multiply(c0, c1)\n}")
    exe = load_artifact(compile_module(module))
    assert len(exe.artifact.kernels) == 1
    a, b = rng.standard_normal((2, 256, 1024), dtype=np.float32)
    np.testing.assert_array_equal(exe.run([a, b])[0], (a + b) * (b + b))
