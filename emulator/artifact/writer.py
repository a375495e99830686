"""Writes the `.neff` artifact: header, section table, checksummed payload.

Deterministic by construction (canonical JSON, fixed section order, zero padding), so the same
module and flags give byte-identical artifacts.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from emulator.artifact import format as fmt
from emulator.program.dtypes import name_of
from emulator.program.model import Program


@dataclass
class KernelPayload:
    """A named binary blob for a later kernel executor (`kind` says which one reads it)."""

    name: str
    kind: str
    data: bytes


@dataclass
class ArtifactContents:
    manifest: dict[str, Any]
    program: Program
    constants: Sequence[np.ndarray] = ()
    kernels: Sequence[KernelPayload] = field(default_factory=list)


def _json(doc: Any) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def _blobs(blobs: Sequence[bytes]) -> tuple[list[tuple[int, int]], bytes]:
    """Concatenate with 64-byte alignment; return (offset, size) of each and the data."""
    out = bytearray()
    spans = []
    for b in blobs:
        out += b"\x00" * (fmt.align(len(out)) - len(out))
        spans.append((len(out), len(b)))
        out += b
    return spans, bytes(out)


def _array_bytes(a: np.ndarray) -> bytes:
    a = np.array(a, order="C", copy=False) if a.flags.c_contiguous else np.array(a, order="C")
    if a.dtype.itemsize > 1 and a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    return a.tobytes()


def write_artifact(contents: ArtifactContents) -> bytes:
    """The artifact bytes for `contents`."""
    const_spans, const_data = _blobs([_array_bytes(c) for c in contents.constants])
    const_index = [{"dtype": name_of(c.dtype), "shape": list(c.shape), "offset": o, "nbytes": n}
                   for c, (o, n) in zip(contents.constants, const_spans)]
    kern_spans, kern_data = _blobs([k.data for k in contents.kernels])
    kern_index = [{"name": k.name, "kind": k.kind, "offset": o, "nbytes": n}
                  for k, (o, n) in zip(contents.kernels, kern_spans)]
    sections = [
        (fmt.MANIFEST, _json(contents.manifest)),
        (fmt.PROGRAM, contents.program.to_json_bytes()),
        (fmt.CONST_INDEX, _json(const_index)),
        (fmt.CONST_DATA, const_data),
        (fmt.KERNEL_INDEX, _json(kern_index)),
        (fmt.KERNEL_DATA, kern_data),
    ]
    payload = bytearray()
    table = []
    for name, data in sections:
        payload += b"\x00" * (fmt.align(len(payload)) - len(payload))
        table.append(fmt.SECTION.pack(name.encode("ascii"), len(payload), len(data)))
        payload += data
    header_size = fmt.HEADER.size + fmt.SECTION.size * len(sections)
    table_bytes = b"".join(table)
    digest = hashlib.sha256(table_bytes + payload).digest()
    header = fmt.HEADER.pack(fmt.MAGIC, fmt.VERSION_MAJOR, fmt.VERSION_MINOR, header_size, len(sections), 0,
                             len(payload), digest)
    return header + table_bytes + bytes(payload)
