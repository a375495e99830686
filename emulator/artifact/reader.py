"""Reads and validates the `.neff` artifact; every defect is an ArtifactError.

Order of checks (cheapest first, and each guarding the next): size of the fixed header, magic,
major version, header and payload sizes against the file size, SHA-256 over section table and
payload, section table (known names, in-bounds, non-overlapping), then the JSON sections and the
constant index against the data they describe. After the checksum, a defect can only come from a
writer bug or a deliberate forgery, but it is still reported as an ArtifactError, never a crash.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass
from typing import Any

import numpy as np

from emulator.artifact import format as fmt
from emulator.artifact.errors import ArtifactError
from emulator.artifact.writer import KernelPayload
from emulator.program.dtypes import DTYPES
from emulator.program.model import Program, ProgramError, check_type


@dataclass
class Artifact:
    """The decoded sections of an artifact."""

    version: tuple[int, int]
    manifest: dict[str, Any]
    program: Program
    constants: list[np.ndarray]
    kernels: list[KernelPayload]


def read_regular_file(path: str | os.PathLike, *, follow_links: bool = True) -> tuple[bytes, os.stat_result]:
    """The bytes of a regular file and its status, read through one descriptor.

    Why not ``open(path).read()``: a FIFO blocks that open forever, and ``/dev/zero`` or a file
    that grows while it is read never ends. The open is non-blocking (a FIFO opens at once), the
    descriptor must be a regular file, and the read stops at the size the file had when opened.
    `follow_links=False` refuses a symbolic link as the last component (cache entries).
    Raises OSError (a FIFO, device or directory as IsADirectoryError / OSError naming the kind).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise OSError(f"{os.fspath(path)!r} is {kind}")
        chunks, left = [], st.st_size
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def read_bytes(source: str | os.PathLike | bytes | bytearray | memoryview) -> bytes:
    """The artifact bytes from a path (a regular file, read up to its size) or from bytes."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    try:
        return read_regular_file(source)[0]
    except (OSError, ValueError) as e:  # ValueError: a path with a NUL byte
        raise ArtifactError(f"can not read artifact {os.fspath(source)!r}: {e}") from None


def read_artifact(data: bytes) -> Artifact:
    if len(data) < fmt.HEADER.size:
        raise ArtifactError(f"truncated artifact: {len(data)} bytes, the header alone is {fmt.HEADER.size}")
    magic, major, minor, header_size, count, reserved, payload_size, digest = fmt.HEADER.unpack_from(data)
    if magic != fmt.MAGIC:
        raise ArtifactError(f"not a neuron-customcall artifact (magic {magic!r}, expected {fmt.MAGIC!r})")
    if major != fmt.VERSION_MAJOR:
        raise ArtifactError(f"unsupported artifact format version {major}.{minor}; this emulator reads "
                            f"{fmt.VERSION_MAJOR}.x (recompile the module)")
    if reserved != 0:
        raise ArtifactError("corrupted artifact header: reserved field is not zero")
    if not 0 < count <= fmt.MAX_SECTIONS or header_size != fmt.HEADER.size + fmt.SECTION.size * count:
        raise ArtifactError(f"corrupted artifact header: {count} sections, header size {header_size}")
    if len(data) < header_size + payload_size:
        raise ArtifactError(f"truncated artifact: {len(data)} bytes, header says {header_size + payload_size}")
    if len(data) > header_size + payload_size:
        raise ArtifactError(f"corrupted artifact: {len(data) - header_size - payload_size} bytes after the payload")
    table = data[fmt.HEADER.size:header_size]
    payload = memoryview(data)[header_size:]
    if hashlib.sha256(table + payload).digest() != digest:
        raise ArtifactError("corrupted artifact: SHA-256 of section table and payload does not match the header")
    sections = _sections(table, count, payload_size)
    missing = [s for s in fmt.REQUIRED_SECTIONS if s not in sections]
    if missing:
        raise ArtifactError(f"malformed artifact: missing sections {missing}")

    def section(name: str) -> memoryview:
        off, size = sections[name]
        return payload[off:off + size]

    manifest = _json(section(fmt.MANIFEST), fmt.MANIFEST)
    check_manifest(manifest)
    try:
        program = Program.from_json_bytes(bytes(section(fmt.PROGRAM)))
    except ProgramError as e:
        raise ArtifactError(f"malformed program section: {e}") from None
    constants = _constants(_json(section(fmt.CONST_INDEX), fmt.CONST_INDEX), section(fmt.CONST_DATA))
    kernels = _kernels(_json(section(fmt.KERNEL_INDEX), fmt.KERNEL_INDEX), section(fmt.KERNEL_DATA))
    return Artifact((major, minor), manifest, program, constants, kernels)


def _sections(table: bytes, count: int, payload_size: int) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    end = 0
    for k in range(count):
        raw, off, size = fmt.SECTION.unpack_from(table, k * fmt.SECTION.size)
        try:
            name = raw.rstrip(b"\x00").decode("ascii")
        except UnicodeDecodeError:
            raise ArtifactError(f"malformed section table: entry {k} has a non-ASCII name") from None
        if name in out or off % fmt.ALIGN or off < end or off + size > payload_size:
            raise ArtifactError(f"malformed section table: section {name!r} at {off}+{size} "
                                f"(payload {payload_size} bytes)")
        out[name] = (off, size)
        end = off + size
    return out


def _json(raw: memoryview, name: str) -> Any:
    try:
        return json.loads(bytes(raw).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ArtifactError(f"malformed {name} section: {e}") from None


def _need(cond: bool, what: str) -> None:
    if not cond:
        raise ArtifactError(what)


def _is_dtype(v: Any) -> bool:
    """A dtype name this emulator knows (a list or object there is malformed, not a TypeError)."""
    return type(v) is str and v in DTYPES


def _io_list(v: Any, what: str) -> None:
    _need(type(v) is list, f"malformed manifest: {what} is not a list")
    for e in v:
        _need(isinstance(e, dict) and type(e.get("name")) is str and _is_dtype(e.get("dtype"))
              and type(e.get("shape")) is list and all(type(d) is int and d >= 0 for d in e["shape"]),
              f"malformed manifest: bad {what} entry {e!r}")


def check_manifest(m: Any) -> None:
    """Validate the manifest's structure (the fields the loader and its users rely on)."""
    _need(isinstance(m, dict), "malformed manifest: not an object")
    for key in ("inputs", "outputs"):
        _io_list(m.get(key), key)
    for key in ("hlo_fingerprint", "compiler_version", "module_name"):
        _need(type(m.get(key)) is str, f"malformed manifest: {key} is not a string")
    _need(isinstance(m.get("flags"), dict), "malformed manifest: flags is not an object")
    _need(type(m.get("cache_key", "")) is str, "malformed manifest: cache_key is not a string")
    aliases = m.get("aliases")
    _need(type(aliases) is list and all(
        isinstance(a, dict) and type(a.get("output")) is int and type(a.get("input")) is int
        and 0 <= a["output"] < len(m["outputs"]) and 0 <= a["input"] < len(m["inputs"]) for a in aliases),
        "malformed manifest: bad aliases")


def _constants(index: Any, data: memoryview) -> list[np.ndarray]:
    _need(type(index) is list, "malformed constant index: not a list")
    out = []
    for k, e in enumerate(index):
        _need(isinstance(e, dict) and _is_dtype(e.get("dtype")) and type(e.get("offset")) is int
              and type(e.get("nbytes")) is int, f"malformed constant index entry {k}")
        try:
            check_type([e["dtype"], e.get("shape")], f"constant {k}")
        except ProgramError as err:
            raise ArtifactError(f"malformed constant index: {err}") from None
        dt = DTYPES[e["dtype"]]
        count = 1
        for d in e["shape"]:
            count *= d
        off, n = e["offset"], e["nbytes"]
        _need(n == count * dt.itemsize and 0 <= off and off + n <= len(data),
              f"malformed constant index: constant {k} ({e['dtype']}{e['shape']}) does not fit its data")
        le = dt.newbyteorder("<") if dt.itemsize > 1 and dt.kind in "iufc" else dt
        arr = np.frombuffer(data[off:off + n], dtype=le).astype(dt, copy=True).reshape(e["shape"])
        arr.flags.writeable = False
        out.append(arr)
    return out


def _kernels(index: Any, data: memoryview) -> list[KernelPayload]:
    _need(type(index) is list, "malformed kernel index: not a list")
    out = []
    for k, e in enumerate(index):
        _need(isinstance(e, dict) and type(e.get("name")) is str and type(e.get("kind")) is str
              and type(e.get("offset")) is int and type(e.get("nbytes")) is int
              and 0 <= e["offset"] and e["offset"] + e["nbytes"] <= len(data) and e["nbytes"] >= 0,
              f"malformed kernel index entry {k}")
        out.append(KernelPayload(e["name"], e["kind"], bytes(data[e["offset"]:e["offset"] + e["nbytes"]])))
    return out
