"""The kernel descriptor: the one definition of a Neuron custom-call's ``backend_config``.

Each custom-call with target ``AwsNeuronCustomNativeKernel`` carries, as its backend_config, the
base64 of a UTF-8 JSON document (docs/backend-config.md) that names the kernel, its kind ("nki" or
"gpsimd"), its signature, its SPMD grid and, inline, its payload: the serialised NKI kernel IR, or
the built GpSimd library with the op's descriptor and argument list. Why inline: a dump of the HLO
alone must compile into a self-contained artifact, without the Python source or the user's .so.

Nothing is pickled or eval'd. Decoding is strict: every field is type-checked, the payload's
SHA-256 must match, and an error says which field is wrong (``DescriptorError``).

A payload may also be a reference to a library image registered in this process (version 1.1,
``{"encoding": "sha256", ...}``, kernels/images.py): the torch_xla adapter emits those on its hot
path, and HLO is expanded back to inline payloads wherever it leaves the process
(kernels/references.py). Decoding a reference resolves it; an image this process does not hold is
a DescriptorError naming the kernel.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from emulator.program.dtypes import DTYPES as HLO_DTYPES
from neuron_customcall.kernels import images

#: The custom-call target whose backend_config is a kernel descriptor (as torch-neuronx emits it).
TARGET = "AwsNeuronCustomNativeKernel"
FORMAT = "neuron-customcall-kernel"
#: (major, minor): a reader accepts its major and any minor; a higher minor may add keys.
VERSION: tuple[int, int] = (1, 0)
#: The version of a document whose payload is a reference (it added the "sha256" encoding).
REFERENCE_VERSION: tuple[int, int] = (1, 1)
#: Payload encodings: inline base64, or a reference to an image registered in this process.
INLINE, REFERENCE = "base64", "sha256"
NKI = "nki"
GPSIMD = "gpsimd"
KINDS = (NKI, GPSIMD)
#: GpSimd argument kinds (emulator.gpsimd.descriptor.ARG_KINDS); only "tensor" is an operand.
ARG_KINDS = ("tensor", "scalar", "double", "int64")
_TOP_KEYS = {"format", "version", "kind", "name", "grid", "signature", "payload", "op", "arguments"}


class DescriptorError(ValueError):
    """A backend_config that is not a valid kernel descriptor."""


@dataclass(frozen=True)
class TensorSig:
    """One kernel input or output: its name in the kernel, shape and HLO element type."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}


@dataclass(frozen=True)
class Argument:
    """A GpSimd op argument: a tensor (the next custom-call operand) or an inline scalar value."""

    kind: str
    value: float | int | bool | None = None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind} if self.kind == "tensor" else {"kind": self.kind, "value": self.value}


@dataclass(frozen=True)
class KernelDescriptor:
    """A kernel as a custom-call carries it. ``payload``: NKI kernel IR bytes, or the GpSimd
    library image; ``op`` (GpSimd only) is the emulator.gpsimd OpDescriptor as a JSON object."""

    kind: str
    name: str
    inputs: tuple[TensorSig, ...]
    outputs: tuple[TensorSig, ...]
    payload: bytes
    grid: tuple[int, ...] = (1,)
    op: dict[str, Any] | None = None
    arguments: tuple[Argument, ...] = field(default_factory=tuple)
    #: Whether the document names the payload by hash (registered in kernels/images) instead of
    #: carrying it; the payload bytes are held either way.
    by_reference: bool = False

    def to_document(self) -> dict[str, Any]:
        digest = hashlib.sha256(self.payload).hexdigest()
        if self.by_reference:
            images.register(self.payload)
            payload: dict[str, Any] = {"encoding": REFERENCE, "nbytes": len(self.payload), "sha256": digest}
        else:
            payload = {"encoding": INLINE, "nbytes": len(self.payload), "sha256": digest,
                       "data": base64.b64encode(self.payload).decode("ascii")}
        doc: dict[str, Any] = {
            "format": FORMAT, "version": list(REFERENCE_VERSION if self.by_reference else VERSION),
            "kind": self.kind, "name": self.name, "grid": list(self.grid),
            "signature": {"inputs": [t.to_json() for t in self.inputs],
                          "outputs": [t.to_json() for t in self.outputs]},
            "payload": payload,
        }
        if self.kind == GPSIMD:
            doc["op"] = self.op
            doc["arguments"] = [a.to_json() for a in self.arguments]
        return doc


def encode(desc: KernelDescriptor) -> str:
    """The backend_config string of a descriptor (validated first, so a bad one never ships)."""
    doc = desc.to_document()
    _validate(doc)
    text = json.dumps(doc, separators=(",", ":"), sort_keys=True)
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def decode(config: str | bytes) -> KernelDescriptor:
    """The descriptor in a backend_config; DescriptorError says what is wrong."""
    raw = config.encode("ascii", "replace") if isinstance(config, str) else bytes(config)
    if not raw.strip():
        raise DescriptorError("backend_config is empty; a Neuron kernel custom-call carries a "
                              "kernel descriptor")
    try:
        text = base64.b64decode(raw.strip(), validate=True)
    except (binascii.Error, ValueError) as e:
        raise DescriptorError(f"backend_config is not base64: {e}") from None
    try:
        doc = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DescriptorError(f"backend_config is not base64 of a JSON document: {e}") from None
    return _validate(doc)


# --- validation ----------------------------------------------------------------------------------

def _need(ok: bool, message: str) -> None:
    if not ok:
        raise DescriptorError(message)


def _int_list(value: Any, what: str, minimum: int) -> tuple[int, ...]:
    _need(type(value) is list and all(type(v) is int and v >= minimum for v in value),
          f"{what} must be a list of integers >= {minimum}, got {value!r}")
    return tuple(value)


def _tensors(value: Any, what: str) -> tuple[TensorSig, ...]:
    _need(type(value) is list, f"signature.{what} must be a list")
    out = []
    for k, t in enumerate(value):
        where = f"signature.{what}[{k}]"
        _need(type(t) is dict and set(t) == {"name", "shape", "dtype"},
              f"{where} must be an object with exactly name, shape and dtype")
        _need(type(t["name"]) is str and bool(t["name"]), f"{where}.name must be a non-empty string")
        _need(t["dtype"] in HLO_DTYPES, f"{where}.dtype {t['dtype']!r} is not an HLO element type")
        out.append(TensorSig(t["name"], _int_list(t["shape"], f"{where}.shape", 0), t["dtype"]))
    names = [t.name for t in out]
    _need(len(set(names)) == len(names), f"signature.{what} repeats a name: {names}")
    return tuple(out)


def _payload(value: Any, name: Any, minor: int) -> tuple[bytes, bool]:
    """The payload's bytes, and whether the document named them by reference."""
    if type(value) is dict and value.get("encoding") == REFERENCE and minor >= REFERENCE_VERSION[1]:
        _need(set(value) == {"encoding", "nbytes", "sha256"} and type(value["sha256"]) is str
              and type(value["nbytes"]) is int, "a payload reference has exactly encoding, nbytes and sha256")
        data = images.image(value["sha256"])
        _need(data is not None and len(data) == value["nbytes"],
              f"kernel {name!r}: its backend_config names its code by reference (library image sha256 "
              f"{value['sha256'][:16]}..., {value['nbytes']} bytes), and this process has no such image. A "
              "reference is valid only in the process that emitted it; HLO saved for another process must "
              "carry the image inline (neuron_customcall.kernels.references.expand, or "
              "NEURON_CUSTOMCALL_KERNEL_REFS=0 when tracing)")
        return data, True  # type: ignore[return-value]
    _need(type(value) is dict and value.get("encoding") == INLINE,
          "payload must be an object with encoding 'base64'")
    _need(type(value.get("data")) is str and type(value.get("sha256")) is str
          and type(value.get("nbytes")) is int, "payload needs data, sha256 and nbytes")
    try:
        data = base64.b64decode(value["data"], validate=True)
    except (binascii.Error, ValueError) as e:
        raise DescriptorError(f"payload.data is not base64: {e}") from None
    _need(len(data) == value["nbytes"], f"payload is {len(data)} bytes, nbytes says {value['nbytes']}")
    _need(hashlib.sha256(data).hexdigest() == value["sha256"],
          "payload SHA-256 does not match: the kernel payload is corrupt")
    return data, False


def _arguments(value: Any, n_inputs: int) -> tuple[Argument, ...]:
    _need(type(value) is list, "arguments must be a list (GpSimd kernels)")
    out = []
    for k, a in enumerate(value):
        _need(type(a) is dict and a.get("kind") in ARG_KINDS,
              f"arguments[{k}] must be an object whose kind is one of {ARG_KINDS}")
        if a["kind"] == "tensor":
            _need(set(a) == {"kind"}, f"arguments[{k}]: a tensor argument has no value")
            out.append(Argument("tensor"))
        else:
            v = a.get("value")
            ok = type(v) in (int, bool) if a["kind"] == "int64" else type(v) in (int, float, bool)
            _need(ok, f"arguments[{k}]: a {a['kind']} argument needs a numeric value, got {v!r}")
            out.append(Argument(a["kind"], v))
    tensors = sum(a.kind == "tensor" for a in out)
    _need(tensors == n_inputs, f"arguments name {tensors} tensors, the signature has {n_inputs} inputs")
    return tuple(out)


def _validate(doc: Any) -> KernelDescriptor:
    _need(type(doc) is dict, "the kernel descriptor must be a JSON object")
    _need(doc.get("format") == FORMAT, f"format must be {FORMAT!r}, got {doc.get('format')!r}")
    version = doc.get("version")
    _need(type(version) is list and len(version) == 2 and all(type(v) is int for v in version),
          f"version must be [major, minor], got {version!r}")
    _need(version[0] == VERSION[0], f"descriptor version {version[0]}.{version[1]} is not readable "
                                    f"(this reader reads {VERSION[0]}.x)")
    unknown = set(doc) - _TOP_KEYS
    _need(not unknown or version[1] > VERSION[1], f"unknown keys {sorted(unknown)}")
    kind = doc.get("kind")
    _need(kind in KINDS, f"kind must be one of {KINDS}, got {kind!r}")
    _need(type(doc.get("name")) is str and bool(doc["name"]), "name must be a non-empty string")
    grid = _int_list(doc.get("grid"), "grid", 1)
    _need(1 <= len(grid) <= 3, f"grid must have 1 to 3 dimensions, got {list(grid)}")
    sig = doc.get("signature")
    _need(type(sig) is dict and set(sig) == {"inputs", "outputs"},
          "signature must be an object with inputs and outputs")
    inputs, outputs = _tensors(sig["inputs"], "inputs"), _tensors(sig["outputs"], "outputs")
    _need(len(outputs) >= 1, "a kernel has at least one output")
    payload, by_reference = _payload(doc.get("payload"), doc["name"], version[1])
    op, arguments = None, ()
    if kind == GPSIMD:
        _need(grid == (1,), f"a GpSimd kernel has grid [1], got {list(grid)}")
        _need(len(outputs) == 1, "a GpSimd op returns one tensor")
        op = doc.get("op")
        _need(type(op) is dict and type(op.get("name")) is str and type(op.get("args")) is list,
              "op must be the GpSimd op descriptor (an object with name and args)")
        arguments = _arguments(doc.get("arguments"), len(inputs))
        _need([a.kind for a in arguments] == list(op["args"]),
              f"arguments {[a.kind for a in arguments]} disagree with the op's {op['args']}")
    else:
        _need("op" not in doc and "arguments" not in doc, "op and arguments are for GpSimd kernels")
    return KernelDescriptor(kind, doc["name"], inputs, outputs, payload, grid, op, arguments, by_reference)
