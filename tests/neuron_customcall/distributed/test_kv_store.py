"""CallbackStore: the framework's key-value callbacks (as the plugin offers them: functions over
bytes) as a torch.distributed Store, through a PrefixStore as the rendezvous uses it. The real
callbacks (JAX's coordination service through PJRT_Client_Create) are exercised by
tests/neuron_customcall/pjrt/test_multiprocess.py::test_jax_distributed_psum_across_processes."""
from __future__ import annotations

import datetime
import threading

import pytest
import torch.distributed as dist

from neuron_customcall.distributed.kv_store import CallbackStore


class _Fake:
    """Set-once keys, blocking get with a timeout, try-get: what the callbacks promise."""

    def __init__(self) -> None:
        self.values: dict[bytes, bytes] = {}
        self.cond = threading.Condition()
        self.timeouts: list[int] = []

    def get(self, key: bytes, timeout_ms: int) -> bytes:
        self.timeouts.append(timeout_ms)
        with self.cond:
            if not self.cond.wait_for(lambda: key in self.values, timeout_ms / 1000):
                raise TimeoutError(f"the framework's key-value store: get '{key.decode()}': DEADLINE_EXCEEDED")
            return self.values[key]

    def put(self, key: bytes, value: bytes) -> None:
        with self.cond:
            if key in self.values:
                raise RuntimeError(f"ALREADY_EXISTS: {key!r}")
            self.values[key] = value
            self.cond.notify_all()

    def try_get(self, key: bytes) -> bytes | None:
        with self.cond:
            return self.values.get(key)


def _store(fake: _Fake, seconds: float = 5.0) -> tuple[CallbackStore, dist.PrefixStore]:
    base = CallbackStore((fake.get, fake.put, fake.try_get), datetime.timedelta(seconds=seconds))
    return base, dist.PrefixStore("neuron", base)


def test_set_get_wait_and_check_through_a_prefix_store():
    fake = _Fake()
    base, store = _store(fake)
    store.set("a", b"\x00\x01binary")
    store.set("b", "text")
    assert fake.values == {b"neuron/a": b"\x00\x01binary", b"neuron/b": b"text"}
    assert store.get("a") == b"\x00\x01binary"
    assert store.check(["a", "b"]) and not store.check(["a", "c"])
    threading.Timer(0.2, lambda: store.set("late", b"1")).start()
    store.wait(["late"], datetime.timedelta(seconds=5))  # blocks until the other thread sets it
    assert store.multi_get(["a", "late"]) == [b"\x00\x01binary", b"1"]
    assert fake.timeouts[-1] == 5000  # the store's own timeout, in milliseconds


def test_an_expired_wait_and_a_missing_try_get():
    fake = _Fake()
    _, store = _store(fake, seconds=0.2)
    with pytest.raises(Exception, match="DEADLINE_EXCEEDED"):
        store.get("never")
    base = CallbackStore((fake.get, fake.put, None), datetime.timedelta(seconds=1))
    with pytest.raises(NotImplementedError, match="no try-get"):
        base.check(["x"])


@pytest.mark.parametrize("call, message", [
    (lambda s: s.add("n", 1), "no atomic add"),
    (lambda s: s.compare_set("n", "", "1"), "compare-and-set"),
    (lambda s: s.delete_key("n"), "can not delete"),
    (lambda s: s.num_keys(), "can not count"),
])
def test_what_the_callbacks_can_not_do_is_refused_by_name(call, message):
    base, _ = _store(_Fake())
    with pytest.raises(NotImplementedError, match=message):
        call(base)


def test_a_gloo_group_of_one_meets_on_it():
    fake = _Fake()
    base, store = _store(fake)
    group = dist.ProcessGroupGloo(store, 0, 1, datetime.timedelta(seconds=10))
    assert group.size() == 1 and any(k.startswith(b"neuron/") for k in fake.values)
    assert base.clone().get("neuron/0/0") == fake.values[b"neuron/0/0"]  # gloo's rank address, read by a clone
