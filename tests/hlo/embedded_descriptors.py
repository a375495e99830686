"""Read the XLA schema that jaxlib and torch_xla were compiled with, out of their shared libraries.

Why: protobuf's C++ runtime keeps each .proto file's FileDescriptorProto, serialized, inside the
library that uses it. That is the exact field list the framework writes, so comparing it with our
schema checks every name, number, type and reserved number, not just those a test graph happens
to exercise. The frameworks are not imported (only their files are read).
"""

from __future__ import annotations

import importlib.util
import mmap
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2

# FileDescriptorProto field number -> wire type, for finding where a serialized one ends.
_FILE_FIELD_WIRE_TYPES = {1: 2, 2: 2, 3: 2, 4: 2, 5: 2, 6: 2, 7: 2, 8: 2, 9: 2, 10: 0, 11: 0,
                          12: 2, 13: 0, 14: 0}


def jaxlib_library() -> Path:
    """jaxlib's shared library that links XLA (libjax_common.so in jaxlib 0.10)."""
    spec = importlib.util.find_spec("jaxlib")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("jaxlib is not installed")
    root = Path(next(iter(spec.submodule_search_locations)))
    libs = sorted(root.glob("libjax_common*.so*")) or sorted(root.glob("*.so*"))
    return max(libs, key=lambda p: p.stat().st_size)


def torch_xla_library() -> Path:
    """torch_xla's extension module (_XLAC), which links XLA."""
    spec = importlib.util.find_spec("_XLAC")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("torch_xla's _XLAC extension is not installed")
    return Path(spec.origin)


def _varint(buf: Any, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, i


def _end_of_file_descriptor(buf: Any, start: int) -> int:
    """Walk top-level fields from start until one cannot belong to a FileDescriptorProto."""
    i = start
    while i < len(buf):
        try:
            tag, j = _varint(buf, i)
            number, wire_type = tag >> 3, tag & 7
            if _FILE_FIELD_WIRE_TYPES.get(number) != wire_type:
                break
            length, j = _varint(buf, j)
            j = j + length if wire_type == 2 else j
        except IndexError:
            break
        if j > len(buf):
            break
        i = j
    return i


def embedded_file_descriptor(library: Path, proto_path: str) -> descriptor_pb2.FileDescriptorProto:
    """The FileDescriptorProto of proto_path (e.g. "xla/service/hlo.proto") inside library."""
    name = proto_path.encode()
    needle = b"\x0a" + bytes([len(name)]) + name + b"\x12\x03xla"  # name, then package "xla"
    with open(library, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        start = buf.find(needle)
        if start < 0:
            raise LookupError(f"{proto_path} descriptor not found in {library}")
        end = _end_of_file_descriptor(buf, start)
        return descriptor_pb2.FileDescriptorProto.FromString(buf[start:end])


Shape = dict[str, Any]


def flatten(files: list[descriptor_pb2.FileDescriptorProto]) -> dict[str, Shape]:
    """Every message and enum by full name -> a comparable summary of its wire-relevant parts."""
    out: dict[str, Shape] = {}

    def enum(e: descriptor_pb2.EnumDescriptorProto, scope: str) -> None:
        out[f"{scope}.{e.name}"] = {"values": sorted((v.number, v.name) for v in e.value)}

    def message(m: descriptor_pb2.DescriptorProto, scope: str) -> None:
        full = f"{scope}.{m.name}"
        out[full] = {
            "fields": {
                f.number: (
                    f.name,
                    f.type,
                    f.label,
                    f.type_name,
                    m.oneof_decl[f.oneof_index].name if f.HasField("oneof_index") else None,
                    f.proto3_optional,
                )
                for f in m.field
            },
            "reserved_numbers": sorted((r.start, r.end) for r in m.reserved_range),
            "reserved_names": sorted(m.reserved_name),
        }
        for e in m.enum_type:
            enum(e, full)
        for n in m.nested_type:
            message(n, full)

    for fd in files:
        scope = f".{fd.package}"
        for e in fd.enum_type:
            enum(e, scope)
        for m in fd.message_type:
            message(m, scope)
    return out
