"""Kernel images named by hash in a backend_config (kernels/references.py): the reference form is
small, decodes to the same kernel in this process, is expanded back to the inline form wherever
HLO reaches the compiler, and a reference this process can not resolve is an error naming the
kernel (never a silent miss)."""
from __future__ import annotations

import base64
import dataclasses
import json
import os

import hlo
import pytest

from neuron_customcall import backend
from neuron_customcall.compiler import CompileError, compile_module
from neuron_customcall.kernels import images, references
from neuron_customcall.kernels.descriptor import (Argument, DescriptorError, KernelDescriptor, TensorSig,
                                                  decode, encode)


def _descriptor(image: bytes) -> KernelDescriptor:
    return KernelDescriptor(
        kind="gpsimd", name="refs_ops::scale", inputs=(TensorSig("a0", (4, 4), "f32"),),
        outputs=(TensorSig("out", (4, 4), "f32"),), payload=image,
        op={"name": "scale", "args": ["tensor", "double"]},
        arguments=(Argument("tensor"), Argument("double", 0.5)))


def _doc(config: str) -> dict:
    return json.loads(base64.b64decode(config))


def test_a_reference_is_small_and_decodes_to_the_same_kernel():
    image = os.urandom(100_000)
    inline = encode(_descriptor(image))
    ref = references.by_reference(inline)
    assert len(ref) < 1500 < 100_000 < len(inline)
    doc = _doc(ref)
    assert doc["version"] == [1, 1] and set(doc["payload"]) == {"encoding", "nbytes", "sha256"}
    assert _doc(inline)["version"] == [1, 0]  # inline configs are unchanged (cache keys too)
    desc = decode(ref)
    assert desc.by_reference and desc.payload == image
    assert dataclasses.replace(desc, by_reference=False) == decode(inline)
    assert references.by_reference(inline) is ref  # memoised: one conversion per config
    assert references.expand(ref) == inline and references.expand(inline) is inline
    assert ref in references.emitted()


def test_a_reference_to_an_image_this_process_does_not_hold_names_the_kernel():
    doc = _doc(encode(_descriptor(b"\x7fELF" + os.urandom(64))))
    doc["version"] = [1, 1]
    doc["payload"] = {"encoding": "sha256", "nbytes": 68, "sha256": "ab" * 32}
    foreign = base64.b64encode(json.dumps(doc).encode()).decode()
    with pytest.raises(DescriptorError, match=r"kernel 'refs_ops::scale'.*by reference.*no such image"):
        decode(foreign)
    with pytest.raises(DescriptorError, match="refs_ops::scale"):
        references.expand(foreign)
    # A 1.0 document can not use the reference encoding (a 1.0 reader never could read it).
    doc["version"] = [1, 0]
    with pytest.raises(DescriptorError, match="encoding 'base64'"):
        decode(base64.b64encode(json.dumps(doc).encode()).decode())


def test_a_registered_image_resolves_a_reference_made_elsewhere():
    image = os.urandom(5000)
    desc = dataclasses.replace(_descriptor(image), by_reference=True)
    ref = encode(desc)  # registers the image as it encodes
    assert images.image(images.register(image)) == image
    assert decode(ref).payload == image
    assert references.expand(ref) == encode(_descriptor(image))


def _module_text(config: str) -> str:
    return ("HloModule m\nENTRY e {\n  p0 = f32[4,4] parameter(0)\n"
            f'  ROOT kc = f32[4,4] custom-call(p0), custom_call_target="AwsNeuronCustomNativeKernel", '
            f'backend_config="{config}"\n}}')


def test_hlo_is_expanded_in_protos_texts_and_on_the_way_into_the_compiler(monkeypatch):
    image = os.urandom(20_000)
    inline = encode(_descriptor(image))
    ref = references.by_reference(inline)
    proto = hlo.load(_module_text(ref)).to_proto()
    assert references.expand_proto(proto)
    (inst,) = [i for c in proto.computations for i in c.instructions if i.custom_call_target]
    assert inst.backend_config in (inline, inline.encode())
    assert not references.expand_proto(proto)  # nothing left to expand
    assert references.expand_text(_module_text(ref)) == _module_text(inline)
    # backend.compile_cached fingerprints (cache key) and dumps the expanded module: the same
    # identity as the inline HLO's. The compile itself is stubbed: the image is random bytes.
    seen = []
    monkeypatch.setattr(backend, "_compile_or_fetch", lambda build, flags, identity, cache: seen.append(
        (identity.fingerprint, build())) or backend.Compiled(b"", None))
    backend.clear_memo()
    backend.compile_cached(hlo.load(_module_text(ref)).to_proto().SerializeToString(), cache=False)
    backend.compile_cached(hlo.load(_module_text(inline)).to_proto().SerializeToString(), cache=False)
    assert len(seen) == 1  # the second is a memo hit: the same fingerprint
    module = seen[0][1]
    assert ref not in module.to_text() and inline in module.to_text()
    backend.clear_memo()


def test_an_unresolvable_reference_is_a_compile_error_naming_instruction_and_kernel():
    doc = _doc(encode(_descriptor(b"\x7fELF")))
    doc["version"] = [1, 1]
    doc["payload"] = {"encoding": "sha256", "nbytes": 4, "sha256": "cd" * 32}
    foreign = base64.b64encode(json.dumps(doc).encode()).decode()
    proto = hlo.load(_module_text(foreign)).to_proto()
    assert not references.expand_proto(proto)  # left for the compiler to refuse, by instruction
    with pytest.raises(CompileError, match=r"kc.*refs_ops::scale.*by reference"):
        compile_module(hlo.load(_module_text(foreign)))
