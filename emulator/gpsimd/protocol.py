"""The host <-> worker protocol: framed JSON messages over pipes, tensor bytes in a shared arena.

A frame is a 4-byte little-endian length followed by that many bytes of UTF-8 JSON. Tensor data
never goes through the pipe: it sits in anonymous shared-memory files that both processes map,
at 64-byte-aligned offsets the request names (docs/gpsimd.md lists the fields).
"""

from __future__ import annotations

import json
import mmap
import os
import select
import threading
import time
import weakref
import numpy as np

_LENGTH_BYTES = 4
ALIGN = 64
#: How long the host polls for a reply before it sleeps: a reply that comes within this time is
#: read at once instead of after a sleeping thread's wake-up (in a training step, where the CPUs
#: idle between calls, that wake-up cost about 45 us a call on a 2-core virtual machine).
REPLY_SPIN = 300e-6


def encode(message: dict) -> bytes:
    """A message's frame body: compact UTF-8 JSON."""
    return json.dumps(message, separators=(",", ":")).encode()


def send(fd: int, message: dict) -> None:
    send_body(fd, encode(message))


def send_body(fd: int, body: bytes) -> None:
    """Sends one frame whose body (UTF-8 JSON) is already encoded."""
    data = len(body).to_bytes(_LENGTH_BYTES, "little") + body
    n = os.write(fd, data)
    if n < len(data):
        view = memoryview(data)[n:]
        while view:
            n = os.write(fd, view)
            view = view[n:]


class PeerExited(Exception):
    """The process behind the `watch` descriptor (a pidfd) ended with no message pending: a crash
    that a child it forked, still holding the pipe open, would otherwise hide until the time-out."""


def _wait_readable(fd: int, remaining: float, watch: int | None) -> None:
    """Returns once `fd` is readable; TimeoutError after `remaining` s; PeerExited when `watch`
    (a process's pidfd) says the writer ended and nothing is left to read."""
    ready = select.select([fd] if watch is None else [fd, watch], [], [], max(remaining, 0))[0]
    if fd in ready:
        return
    if ready:
        raise PeerExited
    raise TimeoutError


def _read_exact(fd: int, n: int, deadline: float | None, watch: int | None = None) -> bytes | None:
    chunks, left = [], n
    while left:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            _wait_readable(fd, remaining, watch)
        chunk = os.read(fd, left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive(fd: int, timeout: float | None = None, spin: float = 0.0, watch: int | None = None) -> dict | None:
    """Reads one message; None when the other side closed the pipe; TimeoutError on time-out.
    `spin`: seconds to poll for it (within the time-out) before sleeping; `watch`: the writer's
    pidfd (PeerExited when it ends first; needs a time-out)."""
    body = receive_body(fd, timeout, spin, watch)
    return None if body is None else json.loads(body)


def receive_body(fd: int, timeout: float | None = None, spin: float = 0.0,
                 watch: int | None = None, tokens: bool = False) -> bytes | None:
    """Reads one frame's body, undecoded; None when the other side closed the pipe. An empty
    frame is a wake token of the prepared calls' signalling (control.py): skipped, unless
    `tokens` asks for it (then b"" is returned)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    if spin > 0:
        _poll(fd, spin if timeout is None else min(spin, timeout))
    while True:
        head = _read_exact(fd, _LENGTH_BYTES, deadline, watch)
        if head is None:
            return None
        length = int.from_bytes(head, "little")
        if length or tokens:
            return _read_exact(fd, length, deadline, watch) if length else b""


#: A gap between two looks at the clock that means a poller lost its CPU: polling on a busy
#: machine costs the time slices it loses (control.Spinner), so such a poll stops.
PREEMPTED = 30e-6


def _poll(fd: int, seconds: float) -> None:
    """Returns once `fd` is readable (or closed), after `seconds`, or when the poll finds it was
    preempted, without sleeping."""
    last = time.monotonic()
    end = last + seconds
    while not select.select([fd], [], [], 0)[0]:
        now = time.monotonic()
        if now >= end or now - last > PREEMPTED:
            return
        last = now


def align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


class SharedFile:
    """One anonymous shared-memory file (memfd) mapped by the host. The worker opens it through
    /proc/<host pid>/fd/<fd> and caches its mapping by `ident` (the inode, unique while either
    process holds the file). Nothing is left behind in the file system, even after a crash."""

    def __init__(self, size: int, minimum: int = 1 << 20) -> None:
        self.size = max(align(size), minimum)
        self.fd = os.memfd_create("ncc-gpsimd", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, self.size)
        self.map = mmap.mmap(self.fd, self.size)
        self.ident = os.fstat(self.fd).st_ino
        self.path = f"/proc/{os.getpid()}/fd/{self.fd}"
        # The mapping's address (the temporary array's buffer export ends with it).
        self.address = int(np.frombuffer(self.map, dtype=np.uint8, count=1).ctypes.data)

    def contains(self, address: int, nbytes: int) -> bool:
        return self.address <= address and address + nbytes <= self.address + self.size

    def describe(self) -> dict:
        """The request fields that let the worker map this file."""
        return {"file": self.path, "file_id": self.ident, "file_size": self.size}

    @property
    def key(self) -> tuple[str, int, int]:
        """The values `describe` gives, hashable (what this file contributes to a request)."""
        return (self.path, self.ident, self.size)

    def close(self) -> bool:
        """Unmaps and closes the file; False (and nothing done) while views of it are alive."""
        try:
            self.map.close()
        except BufferError:
            return False
        os.close(self.fd)
        return True


class Arena:
    """The inputs' shared file, reused across calls and replaced by a larger one when needed."""

    def __init__(self) -> None:
        self.file: SharedFile | None = None

    @property
    def size(self) -> int:
        return self.file.size if self.file else 0

    def ensure(self, size: int) -> memoryview:
        if size > self.size:
            self.close()
            self.file = SharedFile(size)
        assert self.file is not None
        return memoryview(self.file.map)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


class SlabPool:
    """Shared files for outputs. An output is handed to the caller as an array viewing its slab,
    without a copy; the slab returns to the pool when that array is garbage, so a steady stream
    of calls reuses memory that is already mapped (no page faults, no copies)."""

    def __init__(self, keep: int = 4) -> None:
        self._free: list[SharedFile] = []
        self._keep = keep
        self._lock = threading.Lock()

    def acquire(self, nbytes: int) -> SharedFile:
        with self._lock:
            fits = [f for f in self._free if f.size >= nbytes]
            if fits:
                best = min(fits, key=lambda f: f.size)
                self._free.remove(best)
                return best
        return SharedFile(nbytes)

    def release(self, slab: SharedFile) -> None:
        with self._lock:
            self._free.append(slab)
            while len(self._free) > self._keep:
                # Evict the smallest; a slab still viewed somewhere is closed later.
                victim = min(self._free, key=lambda f: f.size)
                self._free.remove(victim)
                if not victim.close():
                    self._free.insert(0, victim)
                    break

    def view(self, slab: SharedFile, nbytes: int) -> np.ndarray:
        """A uint8 array over the slab's first `nbytes`; the slab is released with the array."""
        array = np.frombuffer(slab.map, dtype=np.uint8, count=nbytes)
        with _VIEWED_LOCK:
            _VIEWED[slab.ident] = slab
        weakref.finalize(array, self._unview, slab)
        return array

    def _unview(self, slab: SharedFile) -> None:
        with _VIEWED_LOCK:
            _VIEWED.pop(slab.ident, None)
        self.release(slab)

    def close(self) -> None:
        with self._lock:
            self._free = [f for f in self._free if not f.close()]


# Slabs whose outputs are alive somewhere in this process, of every pool: an input that lies in
# one (the output of an earlier op) is passed to the worker where it is, without a copy.
_VIEWED: dict[int, SharedFile] = {}
_VIEWED_LOCK = threading.Lock()


def locate(address: int, nbytes: int) -> tuple[SharedFile, int] | None:
    """The viewed slab holding [address, address + nbytes) and the offset there, if any."""
    with _VIEWED_LOCK:
        for slab in _VIEWED.values():
            if slab.contains(address, nbytes):
                return slab, address - slab.address
    return None
