"""Kernel payloads of an artifact, in the emulator's own format: what a ``kernel`` instruction runs.

Why a format of its own: the emulator must not import ``neuron_customcall``, so it never reads
the framework-facing kernel descriptor (backend_config). The compiler decodes and validates that
descriptor and writes one of these instead; docs/artifact-format.md and docs/backend-config.md
describe both.

Kinds:

* ``nki-ir``: the bytes are a serialised kernel IR (``emulator.kernel_ir.serialise``); its
  ``inputs`` are the instruction's operands in order and its ``outputs`` the results.
* ``gpsimd-op`` (written since artifact format 1.1): ``b"GPSK"``, u32 length N (little endian),
  N bytes of UTF-8 JSON ``{"op": OpDescriptor, "arguments": [{"kind": "tensor"} | {"kind": k,
  "value": v}], "output": {"dtype": gpsimd dtype, "shape": [...]}, "sha256": library digest}``
  and nothing else: the library is the artifact's ``gpsimd-library`` payload of that digest.
  Tensor arguments are the operands, in order.
* ``gpsimd-library``: a GpSimd library image, stored once per artifact however many ops (and
  calls) use it: a library is about 140 KB, its op headers a few hundred bytes.
* ``gpsimd`` (format 1.0, still read): the ``gpsimd-op`` header followed by the library image.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from emulator.gpsimd.args import TensorSpec
from emulator.gpsimd.descriptor import OpDescriptor

NKI_IR = "nki-ir"
GPSIMD = "gpsimd"
GPSIMD_OP = "gpsimd-op"
GPSIMD_LIBRARY = "gpsimd-library"
KINDS = (NKI_IR, GPSIMD, GPSIMD_OP, GPSIMD_LIBRARY)
#: Kinds whose payload is (or names) a compiled native library that runs when the artifact runs:
#: what `load_artifact(allow_native=False)` refuses and `inspect` reports.
NATIVE_KINDS = frozenset({GPSIMD, GPSIMD_OP, GPSIMD_LIBRARY})
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


def _header(payload: GpSimdPayload) -> bytes:
    header = {"op": json.loads(payload.op.to_json()), "arguments": list(payload.arguments),
              "output": payload.output.to_json(),
              "sha256": hashlib.sha256(payload.library).hexdigest()}
    doc = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    return _HEADER.pack(_MAGIC, len(doc)) + doc


def pack_gpsimd(payload: GpSimdPayload) -> bytes:
    """A format 1.0 ``gpsimd`` payload: header and library image in one."""
    return _header(payload) + payload.library


def pack_gpsimd_op(payload: GpSimdPayload) -> bytes:
    """A ``gpsimd-op`` payload: the header alone, naming the library by its SHA-256 (the library
    goes into the artifact once, as a ``gpsimd-library`` payload)."""
    return _header(payload)


def _unpack(data: bytes) -> tuple[GpSimdPayload, str, bytes]:
    """The payload with an empty library, the library digest it names, and the bytes after the
    header."""
    if len(data) < _HEADER.size or data[:4] != _MAGIC:
        raise KernelPayloadError("GpSimd payload: bad magic")
    _, n = _HEADER.unpack_from(data)
    try:
        header = json.loads(bytes(data[_HEADER.size:_HEADER.size + n]).decode("utf-8"))
        op = OpDescriptor(**{**header["op"], "args": tuple(header["op"]["args"])})
        out = TensorSpec(str(header["output"]["dtype"]), tuple(int(s) for s in header["output"]["shape"]))
        arguments = tuple(dict(a) for a in header["arguments"])
        digest = str(header["sha256"])
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise KernelPayloadError(f"GpSimd payload: malformed header: {type(e).__name__}: {e}") from None
    if [a.get("kind") for a in arguments] != list(op.args):
        raise KernelPayloadError(f"GpSimd payload of op {op.name!r}: arguments disagree with the op")
    return GpSimdPayload(op, arguments, out, b""), digest, bytes(data[_HEADER.size + n:])


def unpack_gpsimd(data: bytes) -> GpSimdPayload:
    """Reads a format 1.0 ``gpsimd`` payload (header and library image)."""
    payload, digest, library = _unpack(data)
    if hashlib.sha256(library).hexdigest() != digest:
        raise KernelPayloadError(f"GpSimd payload of op {payload.op.name!r}: library bytes are corrupt")
    return dataclasses.replace(payload, library=library)


def unpack_gpsimd_op(data: bytes, libraries: Mapping[str, bytes]) -> GpSimdPayload:
    """Reads a ``gpsimd-op`` payload; `libraries` maps SHA-256 digests to the artifact's
    ``gpsimd-library`` payloads (see `libraries`)."""
    payload, digest, rest = _unpack(data)
    if rest:
        raise KernelPayloadError(f"GpSimd op payload of op {payload.op.name!r}: {len(rest)} bytes "
                                 "after its header")
    if digest not in libraries:
        raise KernelPayloadError(f"GpSimd op payload of op {payload.op.name!r}: its library (SHA-256 "
                                 f"{digest[:16]}...) is not among the artifact's gpsimd-library payloads")
    return dataclasses.replace(payload, library=libraries[digest])


def libraries(payloads: Iterable[tuple[str, bytes]]) -> dict[str, bytes]:
    """The ``gpsimd-library`` payloads among (kind, data) pairs, by SHA-256 (a payload whose bytes
    do not hash to the digest an op names is simply not found: corruption can not pass)."""
    return {hashlib.sha256(data).hexdigest(): bytes(data) for kind, data in payloads if kind == GPSIMD_LIBRARY}
