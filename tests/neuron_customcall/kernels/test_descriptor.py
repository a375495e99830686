"""The backend_config kernel descriptor: round trips, and strict decoding with clear errors."""
from __future__ import annotations

import base64
import json

import pytest

from neuron_customcall.kernels import descriptor as kd
from neuron_customcall.kernels.descriptor import (Argument, DescriptorError, KernelDescriptor,
                                                  TensorSig, decode, encode)

NKI_DESC = KernelDescriptor(
    kind="nki", name="add", grid=(2, 2),
    inputs=(TensorSig("a", (256, 1024), "f32"), TensorSig("b", (256, 1024), "f32")),
    outputs=(TensorSig("c", (256, 1024), "f32"),), payload=b"NKIR\x00payload")
GPSIMD_DESC = KernelDescriptor(
    kind="gpsimd", name="relu_ops::scale", inputs=(TensorSig("a0", (4, 4), "f32"),),
    outputs=(TensorSig("out", (4, 4), "f32"),), payload=b"\x7fELF...",
    op={"name": "scale", "args": ["tensor", "double"]},
    arguments=(Argument("tensor"), Argument("double", 0.5)))


def _doc(config: str) -> dict:
    return json.loads(base64.b64decode(config))


def _config(doc: dict) -> str:
    return base64.b64encode(json.dumps(doc).encode()).decode()


@pytest.mark.parametrize("desc", [NKI_DESC, GPSIMD_DESC], ids=["nki", "gpsimd"])
def test_round_trip(desc):
    config = encode(desc)
    assert config.isascii()
    assert decode(config) == desc
    assert decode(config.encode()) == desc  # HLO protos hold backend_config as bytes


def test_document_names_format_version_and_hash():
    doc = _doc(encode(NKI_DESC))
    assert doc["format"] == kd.FORMAT and doc["version"] == list(kd.VERSION)
    assert doc["signature"]["inputs"][0] == {"name": "a", "shape": [256, 1024], "dtype": "f32"}
    assert doc["payload"]["nbytes"] == len(NKI_DESC.payload) and len(doc["payload"]["sha256"]) == 64


def _mutated(edit) -> str:
    doc = _doc(encode(NKI_DESC))
    edit(doc)
    return _config(doc)


@pytest.mark.parametrize("config, message", [
    ("", "empty"),
    ("not base64!", "not base64"),
    (base64.b64encode(b"{not json").decode(), "not base64 of a JSON"),
    (_config([1, 2]), "JSON object"),
    (_mutated(lambda d: d.update(format="other")), "format must be"),
    (_mutated(lambda d: d.update(version=[2, 0])), "version 2.0 is not readable"),
    (_mutated(lambda d: d.update(extra=1)), "unknown keys"),
    (_mutated(lambda d: d.update(kind="cuda")), "kind must be one of"),
    (_mutated(lambda d: d.update(grid=[0])), "grid must be a list of integers >= 1"),
    (_mutated(lambda d: d.update(grid=[1, 1, 1, 1])), "1 to 3 dimensions"),
    (_mutated(lambda d: d["signature"]["inputs"][0].update(dtype="float32")), "not an HLO element type"),
    (_mutated(lambda d: d["signature"]["inputs"][1].update(name="a")), "repeats a name"),
    (_mutated(lambda d: d["signature"].update(outputs=[])), "at least one output"),
    (_mutated(lambda d: d["payload"].update(sha256="0" * 64)), "SHA-256 does not match"),
    (_mutated(lambda d: d["payload"].update(nbytes=1)), "nbytes says 1"),
    (_mutated(lambda d: d.update(op={"name": "x", "args": []})), "for GpSimd kernels"),
])
def test_invalid_configs_are_clear_errors(config, message):
    with pytest.raises(DescriptorError, match=message):
        decode(config)


def test_gpsimd_arguments_must_agree_with_the_op():
    doc = _doc(encode(GPSIMD_DESC))
    doc["arguments"] = [{"kind": "tensor"}, {"kind": "int64", "value": 1}]
    with pytest.raises(DescriptorError, match="disagree with the op"):
        decode(_config(doc))
    doc["arguments"] = [{"kind": "tensor"}, {"kind": "double"}]
    with pytest.raises(DescriptorError, match="needs a numeric value"):
        decode(_config(doc))


def test_encode_refuses_an_invalid_descriptor():
    bad = KernelDescriptor(kind="nki", name="", inputs=(), outputs=(TensorSig("c", (1,), "f32"),),
                           payload=b"")
    with pytest.raises(DescriptorError, match="name must be"):
        encode(bad)
