"""Results of shape calls, per library, keyed by the exact request (op index and argument
descriptions: dtypes, shapes, scalar values).

Graph building asks for the same shape many times (torch.compile's fake tensors, export, XLA
lowering, JAX abstract evaluation, and every eager call); a shape function is a pure function of
its arguments, so each signature pays the worker round trip once.
"""

from __future__ import annotations

import json
import threading

from emulator.gpsimd.args import TensorSpec

CAPACITY = 4096


def key(index: int, fields: list[dict]) -> str:
    """The cache key of shape call `index` with argument descriptions `fields`."""
    return f"{index}:{json.dumps(fields, sort_keys=True, separators=(',', ':'))}"


class ShapeCache:
    """A bounded, thread-safe map from shape-call key to result. When full, the oldest entry
    goes: a library sees few signatures, so the bound only guards against unbounded growth
    (say, a new sequence length every step), and no recency bookkeeping is worth its cost."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self._entries: dict[str, TensorSpec] = {}
        self._capacity = capacity
        self._lock = threading.Lock()

    def get(self, k: str) -> TensorSpec | None:
        return self._entries.get(k)

    def put(self, k: str, spec: TensorSpec) -> None:
        with self._lock:
            self._entries[k] = spec
            if len(self._entries) > self._capacity:
                del self._entries[next(iter(self._entries))]

    def __len__(self) -> int:
        return len(self._entries)
