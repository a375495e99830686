"""Byte layout constants of the `.neff` artifact (documented in docs/artifact-format.md).

    offset  size  field
    0       8     magic b"NCCNEFF\\0"
    8       2     format major version (u16 LE); a reader accepts only its own major
    10      2     format minor version (u16 LE); minor bumps only add optional sections
    12      4     header size in bytes (u32 LE) = 64 + 32 * section count
    16      4     section count (u32 LE)
    20      4     reserved, zero
    24      8     payload size in bytes (u64 LE)
    32      32    SHA-256 of the section table followed by the payload
    64      32*n  section table: name (16 bytes ASCII, NUL padded), offset (u64 LE, from the payload
                  start), size (u64 LE)
    header  ...   payload: the sections, each starting at a multiple of 64 bytes
"""
from __future__ import annotations

import struct

MAGIC = b"NCCNEFF\x00"
VERSION_MAJOR = 1
VERSION_MINOR = 2
HEADER = struct.Struct("<8sHHIII Q32s")
assert HEADER.size == 64
SECTION = struct.Struct("<16sQQ")
assert SECTION.size == 32
ALIGN = 64
MAX_SECTIONS = 64

# Section names.
MANIFEST = "MANIFEST"        # JSON: inputs, outputs, fingerprint, compiler version, flags
PROGRAM = "PROGRAM"          # JSON: emulator.program.Program
CONST_INDEX = "CONST_INDEX"  # JSON list: [{"dtype", "shape", "offset", "nbytes"}] into CONST_DATA
CONST_DATA = "CONST_DATA"    # raw little-endian row-major arrays, 64-byte aligned
KERNEL_INDEX = "KERNEL_INDEX"  # JSON list: [{"name", "kind", "offset", "nbytes"}] into KERNEL_DATA
KERNEL_DATA = "KERNEL_DATA"  # raw kernel payload blobs

REQUIRED_SECTIONS = (MANIFEST, PROGRAM, CONST_INDEX, CONST_DATA, KERNEL_INDEX, KERNEL_DATA)


def align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN
