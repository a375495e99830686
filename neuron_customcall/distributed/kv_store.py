"""The framework's key-value store as a torch.distributed Store, for the gloo group's rendezvous.

Why: when JAX (after `jax.distributed.initialize`) or torch_xla (with its coordinator) creates
the neuron client, it passes `kv_get` / `kv_put` / `kv_try_get` callbacks in
PJRT_Client_Create_Args: a store every process of the run already shares (JAX's coordination
service). The plugin (pjrt/native/neuron_pjrt.cc) hands them to Python as three functions over
bytes; this wrapper makes them the Store a ProcessGroupGloo meets through, so the processes need
no address or port of their own (no NEURON_RT_ROOT_COMM_ID, no launcher store).

What the callbacks offer is set-once keys, blocking get with a timeout and a non-blocking get,
which is what gloo's rendezvous uses (`set` of each rank's address, `get`/`wait` of the others').
`add` and `compare_set` need an atomic read-modify-write the callbacks do not have: they raise
with that said, rather than race. Keys and values are bytes; nothing is pickled.

A Store written in Python lives only as long as its Python object: torch's C++ side (a
PrefixStore, the gloo group) keeps the C++ part, whose overrides vanish with the object ("Not
implemented" from c10d). Whoever builds a group on it must keep the object (rendezvous.py does).
"""
from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable, Sequence

import torch.distributed as dist

log = logging.getLogger(__name__)

#: The plugin's functions: get(key, timeout_ms) -> bytes, put(key, value), try_get(key) -> bytes | None
KvFunctions = tuple[Callable[[bytes, int], bytes], Callable[[bytes, bytes], None],
                    Callable[[bytes], "bytes | None"] | None]

#: how long the polling check/wait sleeps between try-gets when there is no blocking get left
_POLL_S = 0.01


def _key(key: str | bytes) -> bytes:
    return key if isinstance(key, bytes) else key.encode()


def _value(value: str | bytes | bytearray | Sequence[int]) -> bytes:
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


class CallbackStore(dist.Store):
    """A torch.distributed Store over the framework's key-value callbacks (module docstring)."""

    def __init__(self, functions: KvFunctions, timeout: datetime.timedelta) -> None:
        super().__init__()
        self._get, self._put, self._try_get = functions
        self.set_timeout(timeout)

    def _timeout_ms(self, timeout: datetime.timedelta | None = None) -> int:
        t = (timeout or self.timeout).total_seconds()
        return int(min(max(t, 0.001), 2**31 / 1000 - 1) * 1000)

    def set(self, key: str, value: str | bytes) -> None:
        self._put(_key(key), _value(value))

    def get(self, key: str) -> bytes:
        return self._get(_key(key), self._timeout_ms())

    def check(self, keys: list[str]) -> bool:
        if self._try_get is None:
            raise NotImplementedError("the framework's key-value store has no try-get: check() is not available")
        return all(self._try_get(_key(k)) is not None for k in keys)

    def wait(self, keys: list[str], timeout: datetime.timedelta | None = None) -> None:
        deadline = time.monotonic() + (timeout or self.timeout).total_seconds()
        for k in keys:
            left = datetime.timedelta(seconds=max(deadline - time.monotonic(), 0.001))
            self._get(_key(k), self._timeout_ms(left))

    def multi_get(self, keys: list[str]) -> list[bytes]:
        return [self.get(k) for k in keys]

    def multi_set(self, keys: list[str], values: list[str | bytes]) -> None:
        for k, v in zip(keys, values, strict=True):
            self.set(k, v)

    def clone(self) -> CallbackStore:
        """The same store for another thread (gloo's connections are made from one)."""
        return CallbackStore((self._get, self._put, self._try_get), self.timeout)

    def has_extended_api(self) -> bool:
        return False

    def add(self, key: str, value: int) -> int:
        raise NotImplementedError("the framework's key-value store has no atomic add (its callbacks are get/put)")

    def compare_set(self, key: str, expected: str, desired: str) -> bytes:
        raise NotImplementedError("the framework's key-value store has no compare-and-set")

    def delete_key(self, key: str) -> bool:
        raise NotImplementedError("the framework's key-value store can not delete keys")

    def num_keys(self) -> int:
        raise NotImplementedError("the framework's key-value store can not count its keys")
