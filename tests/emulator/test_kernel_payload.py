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
from emulator.kernel_payload import (GPSIMD, GPSIMD_LIBRARY, GPSIMD_OP, NKI_IR, GpSimdPayload,
                                     KernelPayloadError, libraries, pack_gpsimd, pack_gpsimd_op,
                                     unpack_gpsimd, unpack_gpsimd_op)
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
    (KernelPayload("k", GPSIMD_OP, b"ELF"), "bad magic"),
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


def test_gpsimd_op_payload_names_its_library_by_digest():
    payload = GpSimdPayload(OP, ({"kind": "tensor"}, {"kind": "double", "value": 0.5}),
                            TensorSpec("float32", (4, 4)), b"\x7fELF library image")
    header = pack_gpsimd_op(payload)
    assert payload.library not in header and len(header) < 1024
    found = libraries([(GPSIMD_LIBRARY, payload.library), (NKI_IR, b"other")])
    assert unpack_gpsimd_op(header, found) == payload
    corrupt = libraries([(GPSIMD_LIBRARY, payload.library[:-1] + b"!")])
    with pytest.raises(KernelPayloadError, match="its library .* is not among the artifact's gpsimd-library"):
        unpack_gpsimd_op(header, corrupt)
    with pytest.raises(KernelPayloadError, match="bytes after its header"):
        unpack_gpsimd_op(header + b"x", found)


def test_a_gpsimd_op_without_its_library_is_an_artifact_error():
    payload = GpSimdPayload(OP, ({"kind": "tensor"}, {"kind": "double", "value": 0.5}),
                            TensorSpec("float32", (128, 512)), b"\x7fELF library image")
    with pytest.raises(ArtifactError, match="kernel payload 'k': .* not among the artifact's gpsimd-library"):
        load_artifact(_artifact([KernelPayload("k", GPSIMD_OP, pack_gpsimd_op(payload))]))


def _copy_artifact(kernels: list[KernelPayload], payload: int) -> bytes:
    io = [{"name": "v0", "dtype": "f32", "shape": [128, 512]}]
    manifest = {"format": "neuron-customcall-neff", "module_name": "t", "hlo_fingerprint": "",
                "compiler_version": "t", "flags": {}, "aliases": [], "inputs": io, "outputs": io}
    comp = Computation("main", 2, [0], [F], [Instruction("kernel", 1, [0], F, {"payload": payload}, name="k")], 1, F)
    return write_artifact(ArtifactContents(manifest, Program([comp], 0), [], kernels))


def test_gpsimd_payloads_of_both_formats_run():
    from emulator.gpsimd import HostLibrary
    from tests.emulator.gpsimd.gpsimd_kernels import library

    path = library("access_ops")
    image = path.read_bytes()
    op = HostLibrary(path).descriptor.op("copy_tcm")
    payload = GpSimdPayload(op, ({"kind": "tensor"},), TensorSpec("float32", (128, 512)), image)
    x = np.random.default_rng(1).standard_normal((128, 512), dtype=np.float32)
    v1_0 = _copy_artifact([KernelPayload("k", GPSIMD, pack_gpsimd(payload))], 0)
    v1_1 = _copy_artifact([KernelPayload("lib", GPSIMD_LIBRARY, image),
                           KernelPayload("k", GPSIMD_OP, pack_gpsimd_op(payload))], 1)
    for artifact in (v1_0, v1_1):
        np.testing.assert_array_equal(load_artifact(artifact).run([x])[0], x)
