"""Buffers for a bucket's all-reduce and a pair exchange's results (gloo.py), reused once
nothing refers to them.

Why: gloo's all_reduce reduces in place, so a value is first copied into a buffer with room for
its bucket's padding and trailer (trailer.py), and the reduced buffer is the result; a pair
exchange receives the other process's value into its result's buffer and folds into it. A fresh
buffer per call cost its allocation, its first-touch page faults and a torch tensor made over it,
every call (benchmarks/collectives_gloo.md, session 12). Here a bucket keeps its buffers ("blocks"),
each with its pages touched and its tensor made once; the result handed out is a view of the block,
so nothing is copied out, and a block is used again only once no array refers to it any more: the
caller dropped the result (its reference count says so, as in emulator/collectives/buffers.py).
"""
from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

#: Free blocks a pool keeps (more are dropped when a block is taken): a loop that keeps the last
#: result while it makes the next one needs two.
KEEP_FREE = 2


class Block:
    """One buffer (`array`, 1-d, zero-filled when made so that its pages are touched once), what
    the transport reads it through (`tensor`: wrap(array), made once) and its bytes (`raw`, a
    memoryview: slices of it are read and written without NumPy's dispatch)."""

    __slots__ = ("array", "tensor", "raw", "_idle")

    def __init__(self, elements: int, dtype: np.dtype, wrap: Callable[[np.ndarray], Any]) -> None:
        self.array = np.zeros(elements, dtype)
        self.array.fill(0)  # np.zeros may map pages lazily (calloc): touch them now, not in a call
        self.tensor = wrap(self.array)
        self.raw = memoryview(self.array).cast("B")
        self._idle = self._references()  # the block's own: its slot, the wrapper's, the memoryview's, the argument

    def _references(self) -> int:
        return sys.getrefcount(self.array)

    def idle(self) -> bool:
        """No array refers to the block beyond the block itself (a result, a view of one, a
        transport's wrapper of a result all do: NumPy views of views keep the block as their base)."""
        return self._references() == self._idle


class BlockPool:
    """The blocks of one bucket (one element count and dtype)."""

    def __init__(self, elements: int, dtype: np.dtype, wrap: Callable[[np.ndarray], Any],
                 keep_free: int = KEEP_FREE) -> None:
        self.elements = elements
        self.dtype = np.dtype(dtype)
        self.keep_free = keep_free
        self._wrap = wrap
        self._blocks: list[Block] = []
        self._lock = threading.Lock()

    def take(self) -> Block:
        """A block that nothing else refers to (its contents are the last call's)."""
        with self._lock:
            free = [b for b in self._blocks if b.idle()]
            if len(free) > self.keep_free:
                drop = {id(b) for b in free[self.keep_free:]}
                self._blocks = [b for b in self._blocks if id(b) not in drop]
            if free:
                return free[0]
            block = Block(self.elements, self.dtype, self._wrap)
            self._blocks.append(block)
            return block

    def __len__(self) -> int:
        return len(self._blocks)
