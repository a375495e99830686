"""A reader for the IDX files MNIST is distributed in (plain or gzip-compressed).

Why our own: it is twenty lines, and it keeps the example free of downloaders. Format: two zero
bytes, a type code, the number of dimensions, each dimension as a big-endian uint32, then the data
in row-major order, big-endian.
"""
from __future__ import annotations

import gzip
import os

import numpy as np

_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


class IdxError(ValueError):
    """A file that is not a well-formed IDX file."""


def read_idx(path: str | os.PathLike[str]) -> np.ndarray:
    """The array stored in an IDX file (``.gz`` files are decompressed)."""
    with (gzip.open if str(path).endswith(".gz") else open)(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _TYPES:
        raise IdxError(f"{path}: not an IDX file (bad magic {data[:4].hex()})")
    ndim = data[3]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise IdxError(f"{path}: truncated header")
    shape = tuple(int(d) for d in np.frombuffer(data, ">u4", count=ndim, offset=4))
    dtype = np.dtype(_TYPES[data[2]])
    expected = header + dtype.itemsize * int(np.prod(shape, dtype=np.int64))
    if len(data) != expected:
        raise IdxError(f"{path}: {len(data)} bytes, expected {expected} for shape {shape}")
    return np.frombuffer(data, dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))
