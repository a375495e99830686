"""Kernel payloads in artifacts: the emulator runs NKI IR and GpSimd payloads as `kernel`
instructions; malformed or unknown payloads are artifact errors at load."""
from __future__ import annotations

import numpy as np
import pytest

from emulator import ArtifactError, load_artifact
from emulator.artifact import ArtifactContents, KernelPayload, write_artifact
from emulator.gpsimd.args import TensorSpec
from emulator.gpsimd.descriptor import OpDescriptor
from emulator.kernel_ir import serialise
from emulator.kernel_payload import (GPSIMD, NKI_IR, GpSimdPayload, KernelPayloadError,
                                     pack_gpsimd, unpack_gpsimd)
from emulator.program import Computation, Instruction, Program

F = ["f32", [128, 512]]
OP = OpDescriptor(library="lib", name="scale", index=0, compute="scale", symbol="_Z5scale",
                  args=("tensor", "double"))


def _add_ir() -> bytes:
    from tests.neuron_customcall.kernels.seed_kernels import nki_tensor_add_kernel_

    x = np.zeros((128, 512), np.float32)
    return serialise.to_bytes(nki_tensor_add_kernel_.trace([x, x], {}, (1, 1)).ir)


def _artifact(kernels: list[KernelPayload]) -> bytes:
    io = [{"name": f"v{k}", "dtype": "f32", "shape": [128, 512]} for k in range(2)]
    manifest = {"format": "neuron-customcall-neff", "module_name": "t", "hlo_fingerprint": "",
                "compiler_version": "t", "flags": {}, "aliases": [], "inputs": io, "outputs": io[:1]}
    comp = Computation("main", 3, [0, 1], [F, F],
                       [Instruction("kernel", 2, [0, 1], F, {"payload": 0}, name="k")], 2, F)
    return write_artifact(ArtifactContents(manifest, Program([comp], 0), [], kernels))


def test_nki_ir_payload_runs_as_an_instruction():
    exe = load_artifact(_artifact([KernelPayload("k", NKI_IR, _add_ir())]))
    a, b = np.random.default_rng(0).standard_normal((2, 128, 512), dtype=np.float32)
    np.testing.assert_array_equal(exe.run([a, b])[0], a + b)


@pytest.mark.parametrize("payload, message", [
    (KernelPayload("k", "cuda", b""), "has kind 'cuda'"),
    (KernelPayload("k", NKI_IR, b"NKIRgarbage"), "kernel payload 'k'"),
    (KernelPayload("k", GPSIMD, b"ELF"), "bad magic"),
])
def test_bad_payloads_are_artifact_errors(payload, message):
    with pytest.raises(ArtifactError, match=message):
        load_artifact(_artifact([payload]))


def test_gpsimd_payload_round_trip_and_integrity():
    payload = GpSimdPayload(OP, ({"kind": "tensor"}, {"kind": "double", "value": 0.5}),
                            TensorSpec("float32", (4, 4)), b"\x7fELF library image")
    data = pack_gpsimd(payload)
    assert unpack_gpsimd(data) == payload
    with pytest.raises(KernelPayloadError, match="library bytes are corrupt"):
        unpack_gpsimd(data[:-1] + b"!")
    bad = GpSimdPayload(OP, ({"kind": "tensor"},), payload.output, payload.library)
    with pytest.raises(KernelPayloadError, match="arguments disagree"):
        unpack_gpsimd(pack_gpsimd(bad))
    with pytest.raises(KernelPayloadError, match="malformed header"):
        unpack_gpsimd(data[:8] + b"[" + data[9:])
