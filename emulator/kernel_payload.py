"""Kernel payloads of an artifact, in the emulator's own format: what a ``kernel`` instruction runs.

Why a format of its own: the emulator must not import ``neuron_customcall``, so it never reads
the framework-facing kernel descriptor (backend_config). The compiler decodes and validates that
descriptor and writes one of these instead; docs/artifact-format.md and docs/backend-config.md
describe both.

Kinds:

* ``nki-ir``: the bytes are a serialised kernel IR (``emulator.kernel_ir.serialise``); its
  ``inputs`` are the instruction's operands in order and its ``outputs`` the results.
* ``gpsimd``: ``b"GPSK"``, u32 length N (little endian), N bytes of UTF-8 JSON
  ``{"op": OpDescriptor, "arguments": [{"kind": "tensor"} | {"kind": k, "value": v}],
  "output": {"dtype": gpsimd dtype, "shape": [...]}, "sha256": library digest}``, then the
  library image. Tensor arguments are the operands, in order.
"""
from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from typing import Any

from emulator.gpsimd.args import TensorSpec
from emulator.gpsimd.descriptor import OpDescriptor

NKI_IR = "nki-ir"
GPSIMD = "gpsimd"
KINDS = (NKI_IR, GPSIMD)
_MAGIC = b"GPSK"
_HEADER = struct.Struct("<4sI")


class KernelPayloadError(ValueError):
    """Payload bytes that are not a kernel this emulator can run."""


@dataclass(frozen=True)
class GpSimdPayload:
    """A GpSimd op call: the op, its argument list (scalars inline), its output and the library."""

    op: OpDescriptor
    arguments: tuple[dict[str, Any], ...]
    output: TensorSpec
    library: bytes


def pack_gpsimd(payload: GpSimdPayload) -> bytes:
    header = {"op": json.loads(payload.op.to_json()), "arguments": list(payload.arguments),
              "output": payload.output.to_json(),
              "sha256": hashlib.sha256(payload.library).hexdigest()}
    doc = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    return _HEADER.pack(_MAGIC, len(doc)) + doc + payload.library


def unpack_gpsimd(data: bytes) -> GpSimdPayload:
    if len(data) < _HEADER.size or data[:4] != _MAGIC:
        raise KernelPayloadError("GpSimd payload: bad magic")
    _, n = _HEADER.unpack_from(data)
    try:
        header = json.loads(bytes(data[_HEADER.size:_HEADER.size + n]).decode("utf-8"))
        op = OpDescriptor(**{**header["op"], "args": tuple(header["op"]["args"])})
        out = TensorSpec(str(header["output"]["dtype"]), tuple(int(s) for s in header["output"]["shape"]))
        arguments = tuple(dict(a) for a in header["arguments"])
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise KernelPayloadError(f"GpSimd payload: malformed header: {type(e).__name__}: {e}") from None
    library = bytes(data[_HEADER.size + n:])
    if hashlib.sha256(library).hexdigest() != header.get("sha256"):
        raise KernelPayloadError(f"GpSimd payload of op {op.name!r}: library bytes are corrupt")
    if [a.get("kind") for a in arguments] != list(op.args):
        raise KernelPayloadError(f"GpSimd payload of op {op.name!r}: arguments disagree with the op")
    return GpSimdPayload(op, arguments, out, library)
