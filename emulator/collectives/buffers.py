"""Result memory for large collectives, taken back once nothing refers to it.

Why: a collective's result is a new array (XLA's semantics), and from some 32 MB on the C library
maps fresh pages for each one, which the kernel faults in and zeroes as the result is written:
256 MB took 171 ms to copy into fresh pages against 41 ms into pages used before (idle host). A
training loop all-reduces the same gradient sizes every step, and torch.distributed's peers
reduce in place into buffers they keep. Here a result is a view of a block this module keeps;
when every array viewing the block has gone (NumPy views of views keep the block itself as their
base, so its reference count says so), the next result of the same size reuses it.
"""
from __future__ import annotations

import sys
import threading

import numpy as np

#: Results smaller than this come from np.empty (the C library reuses its heap below its mmap
#: threshold, at most 32 MB).
RECYCLED_MIN_BYTES = 32 << 20
#: Blocks kept while nothing refers to them (in use ones are never dropped from the count).
KEEP_FREE = 2


class RecycledBuffers:
    """1-d result arrays of `take`'s size and dtype, viewing blocks reused once free."""

    def __init__(self, min_bytes: int = RECYCLED_MIN_BYTES, keep_free: int = KEEP_FREE) -> None:
        self.min_bytes = min_bytes
        self.keep_free = keep_free
        self._blocks: list[np.ndarray] = []
        self._lock = threading.Lock()

    def _free(self, i: int) -> bool:
        """No array views block i: its only references are the pool's list and getrefcount's
        argument (the expression is written so that no name of ours holds it)."""
        return sys.getrefcount(self._blocks[i]) == 2

    def take(self, size: int, dtype: np.dtype) -> np.ndarray:
        """An uninitialised 1-d array of `size` elements of `dtype` that nothing else refers to."""
        dtype = np.dtype(dtype)
        nbytes = size * dtype.itemsize
        if nbytes < self.min_bytes:
            return np.empty(size, dtype)
        with self._lock:
            for i in range(len(self._blocks)):
                if self._blocks[i].nbytes == nbytes and self._free(i):
                    return self._blocks[i].view(dtype)
            free = [i for i in range(len(self._blocks)) if self._free(i)]
            drop = set(free[:max(0, len(free) + 1 - self.keep_free)])  # the oldest free ones
            self._blocks = [self._blocks[i] for i in range(len(self._blocks)) if i not in drop]
            self._blocks.append(np.empty(nbytes, np.uint8))
            return self._blocks[-1].view(dtype)

    def held_bytes(self) -> int:
        """Bytes of the blocks kept (in use or free)."""
        with self._lock:
            return sum(b.nbytes for b in self._blocks)


#: The process's pool for collective results.
RESULTS = RecycledBuffers()
