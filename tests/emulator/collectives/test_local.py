"""ThreadCommunicator on its own: exchange, private copies, abort, timeout, mismatch, and the
NEURON_RT_EXEC_TIMEOUT default."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from emulator.collectives import CollectiveError, CollectiveTimeout, Communicator, ThreadCommunicator
from emulator.collectives.local import default_timeout


def _on_threads(n: int, fn) -> tuple[list, list]:
    results, errors = [None] * n, [None] * n

    def run(d: int) -> None:
        try:
            results[d] = fn(d)
        except BaseException as e:  # noqa: BLE001
            errors[d] = e
    threads = [threading.Thread(target=run, args=(d,)) for d in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results, errors


def test_endpoints_are_communicators():
    assert isinstance(ThreadCommunicator(2, 1).endpoint(1), Communicator)


def test_all_gather_in_group_order_with_private_copies():
    world = ThreadCommunicator(4, 10)
    values = [np.full(3, d, np.int32) for d in range(4)]

    def device(d: int):
        group = (2, 0) if d in (0, 2) else (1, 3)
        got = world.endpoint(d).all_gather(group, values[d], op="x")
        values[d][...] = 99  # the sender reusing its buffer must not change what others read
        return [g.copy() for g in got]
    results, errors = _on_threads(4, device)
    assert errors == [None] * 4
    assert [r[0][0] for r in results] == [2, 1, 2, 1] and [r[1][0] for r in results] == [0, 3, 0, 3]


def test_permute_delivers_to_targets_and_none_elsewhere():
    world = ThreadCommunicator(3, 10)
    results, errors = _on_threads(3, lambda d: world.endpoint(d).permute([(0, 2), (2, 1)], np.array([d]), op="p"))
    assert errors == [None] * 3
    assert results[0] is None and int(results[1][0]) == 2 and int(results[2][0]) == 0
    assert results[1].flags.writeable  # the target's own


def test_the_slots_are_freed_after_everyone_read():
    world = ThreadCommunicator(2, 10)
    for _ in range(3):
        _on_threads(2, lambda d: world.endpoint(d).all_gather((0, 1), np.zeros(2), op="g"))
    assert world._slots == {}


def test_abort_wakes_waiters_and_fails_later_calls():
    world = ThreadCommunicator(3, 60)

    def device(d: int):
        if d == 1:
            time.sleep(0.2)
            world.endpoint(1).abort(RuntimeError("dead"))
            return None
        return world.endpoint(d).all_gather((0, 1, 2), np.zeros(1), op="g")
    t0 = time.monotonic()
    _, errors = _on_threads(3, device)
    assert time.monotonic() - t0 < 10
    for d in (0, 2):
        assert isinstance(errors[d], CollectiveError) and errors[d].origin == 1
        assert "device 1 failed: RuntimeError: dead" in str(errors[d])
    with pytest.raises(CollectiveError, match="device 1 failed"):
        world.endpoint(0).permute([], np.zeros(1), op="later")
    assert world.origin[0] == 1


def test_timeout_names_the_missing_devices_and_aborts_the_world():
    world = ThreadCommunicator(3, 0.3)
    with pytest.raises(CollectiveTimeout, match=r"g \(call 1\) in group \[0, 1, 2\]: devices \[1, 2\] did not arrive"):
        world.endpoint(0).all_gather((0, 1, 2), np.zeros(1), op="g")
    with pytest.raises(CollectiveError, match="device 0 failed"):
        world.endpoint(1).all_gather((0, 1, 2), np.zeros(1), op="g")


def test_mismatch_is_detected_on_both_sides():
    world = ThreadCommunicator(2, 30)
    _, errors = _on_threads(2, lambda d: world.endpoint(d).all_gather((0, 1), np.zeros(1), op=f"op{d}"))
    assert all(isinstance(e, CollectiveError) for e in errors)
    assert any("mismatched collectives at call 1" in str(e) for e in errors)


@pytest.mark.parametrize("value, seconds", [(None, 600.0), ("5", 5.0), ("0", float("inf"))])
def test_default_timeout_follows_neuron_rt_exec_timeout(monkeypatch, value, seconds):
    if value is None:
        monkeypatch.delenv("NEURON_RT_EXEC_TIMEOUT", raising=False)
    else:
        monkeypatch.setenv("NEURON_RT_EXEC_TIMEOUT", value)
    assert default_timeout() == seconds
    assert ThreadCommunicator(2).timeout_s == seconds


def test_a_bad_timeout_setting_is_named(monkeypatch):
    monkeypatch.setenv("NEURON_RT_EXEC_TIMEOUT", "ten")
    with pytest.raises(ValueError, match="NEURON_RT_EXEC_TIMEOUT='ten'"):
        default_timeout()


def test_all_gather_into_one_array_in_group_order():
    """`out`: the members' values flattened one after another (what the chunked all-reduce
    gathers its folded chunks into); sizes may differ."""
    world = ThreadCommunicator(3, 10)
    outs = [np.full(9, -1.0) for _ in range(3)]

    def device(d: int):
        value = np.arange(d + 2, dtype=np.float64) + 10 * d  # sizes 2, 3, 4
        got = world.endpoint(d).all_gather((2, 0, 1), value, op="g", out=outs[d])
        assert all(np.shares_memory(g, outs[d]) for g in got)
        return [g.tolist() for g in got]
    results, errors = _on_threads(3, device)
    assert errors == [None] * 3
    want = [20, 21, 22, 23, 0, 1, 10, 11, 12]
    assert all(o.tolist() == want for o in outs)
    assert results[0] == [[20, 21, 22, 23], [0, 1], [10, 11, 12]]
    with pytest.raises(CollectiveError, match="into an array of shape"):
        ThreadCommunicator(1, 1).endpoint(0).all_gather((0,), np.zeros(3), out=np.zeros(4))
