"""The host <-> worker protocol: framed JSON messages over pipes, tensor bytes in a shared arena.

A frame is a 4-byte little-endian length followed by that many bytes of UTF-8 JSON. Tensor data
never goes through the pipe: it sits in a file-backed shared-memory arena that both processes map,
at 64-byte-aligned offsets the request names (docs/gpsimd.md lists the fields).
"""

from __future__ import annotations

import json
import mmap
import os
import select
import tempfile
import time
from pathlib import Path

_LENGTH_BYTES = 4
ALIGN = 64


def send(fd: int, message: dict) -> None:
    body = json.dumps(message, separators=(",", ":")).encode()
    data = len(body).to_bytes(_LENGTH_BYTES, "little") + body
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes | None:
    chunks, left = [], n
    while left:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise TimeoutError
        chunk = os.read(fd, left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive(fd: int, timeout: float | None = None) -> dict | None:
    """Reads one message; None when the other side closed the pipe; TimeoutError on time-out."""
    deadline = None if timeout is None else time.monotonic() + timeout
    head = _read_exact(fd, _LENGTH_BYTES, deadline)
    if head is None:
        return None
    body = _read_exact(fd, int.from_bytes(head, "little"), deadline)
    if body is None:
        return None
    return json.loads(body)


def align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _shm_directory() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


class Arena:
    """A shared-memory file mapped by the host; grown by replacing it with a larger one."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.size = 0
        self._map: mmap.mmap | None = None

    def ensure(self, size: int) -> memoryview:
        if size > self.size:
            self.close()
            self.size = max(align(size), 1 << 20)
            fd, name = tempfile.mkstemp(prefix="ncc-gpsimd-", dir=_shm_directory())
            try:
                os.ftruncate(fd, self.size)
                self._map = mmap.mmap(fd, self.size)
            finally:
                os.close(fd)
            self.path = Path(name)
        assert self._map is not None
        return memoryview(self._map)

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        if self.path is not None:
            self.path.unlink(missing_ok=True)
            self.path = None
        self.size = 0
