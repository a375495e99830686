"""Devices that are threads of this process: a barrier-style exchange under one condition variable.

Each device's endpoint numbers its calls; the k-th call of every participant meets in one slot
keyed by k. A depositor stores a private copy of its value (the sender's program may later reuse
that buffer in place while a slower peer still reads it), then waits until every member of its
group has deposited at the same k with the same group and instruction. The last reader of a slot
frees it.

Failure is shared: when any device aborts (its program raised, or it timed out waiting), every
pending wait wakes and raises CollectiveError naming the origin, and every later call raises at
once, so no thread waits for a peer that will never come. The timeout bounds each wait; its
default is the Neuron runtime's NEURON_RT_EXEC_TIMEOUT (seconds; 600 on trn1 in AWS's
nrt-developer-guide), here applied to one collective's wait for its peers.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from emulator.collectives.comm import CollectiveError, CollectiveTimeout, gather_into

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 600.0


def default_timeout() -> float:
    """NEURON_RT_EXEC_TIMEOUT in seconds when set (0 or less: no limit), else 600 (trn1's default)."""
    text = os.environ.get("NEURON_RT_EXEC_TIMEOUT", "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"NEURON_RT_EXEC_TIMEOUT={text!r} is not a number of seconds") from None
    return value if value > 0 else float("inf")


@dataclass
class _Entry:
    """One device's deposit at one sequence number."""

    kind: str                      # "gather", "all-to-all" or "permute"
    key: tuple                     # the group (gather, all-to-all) or the pairs (permute)
    op: str
    value: np.ndarray | list[np.ndarray] | None  # an all-to-all's pieces, in group order
    readers: set[int] = field(default_factory=set)  # devices that still have to read it


def _private(value: np.ndarray, readers: int) -> np.ndarray:
    """A copy of `value` nothing else refers to; read-only when several devices will read it."""
    copy = np.array(value, copy=True)
    copy.flags.writeable = readers == 1
    return copy


class ThreadCommunicator:
    """The shared state of `world_size` devices run as threads; `endpoint(d)` is device d's
    Communicator."""

    def __init__(self, world_size: int, timeout_s: float | None = None) -> None:
        if world_size < 1:
            raise ValueError(f"a world of {world_size} devices")
        self.world_size = world_size
        self.timeout_s = default_timeout() if timeout_s is None else float(timeout_s)
        self._cond = threading.Condition()
        self._slots: dict[int, dict[int, _Entry]] = {}  # sequence -> device -> its deposit
        self._failure: CollectiveError | None = None
        self.origin: tuple[int, BaseException] | None = None  # the first device that failed, and why
        self._endpoints = [ThreadEndpoint(self, d) for d in range(world_size)]

    def endpoint(self, device: int) -> ThreadEndpoint:
        return self._endpoints[device]

    # -- failure ---------------------------------------------------------------------------------
    def abort(self, device: int, error: BaseException) -> None:
        """Device `device` failed with `error`: wake every waiter; every later call fails."""
        with self._cond:
            if self._failure is None:
                self.origin = (device, error)
                cause = error if isinstance(error, CollectiveError) else None
                what = str(error) if cause is not None else f"{type(error).__name__}: {error}"
                self._failure = CollectiveError(f"device {device} failed: {what}", devices=[device],
                                                origin=device)
                log.debug("collectives aborted by device %d: %s", device, what)
            self._cond.notify_all()

    def _raise_if_failed(self, device: int) -> None:
        f = self._failure
        if f is not None:
            raise CollectiveError(str(f), devices=f.devices, origin=f.origin)

    # -- exchange --------------------------------------------------------------------------------
    def _deposit(self, device: int, seq: int, entry: _Entry) -> None:
        with self._cond:
            self._raise_if_failed(device)
            self._slots.setdefault(seq, {})[device] = entry
            self._cond.notify_all()

    def _wait(self, device: int, seq: int, wanted: Sequence[int], check, what: str) -> dict[int, _Entry]:
        """Wait until every device in `wanted` deposited at `seq` (check(entry) raises on a
        mismatch); returns their entries."""
        deadline = time.monotonic() + self.timeout_s
        with self._cond:
            while True:
                self._raise_if_failed(device)
                slot = self._slots.get(seq, {})
                for d in wanted:
                    if d in slot:
                        check(d, slot[d])
                missing = [d for d in wanted if d not in slot]
                if not missing:
                    return {d: slot[d] for d in wanted}
                left = deadline - time.monotonic()
                if left <= 0:
                    error = CollectiveTimeout(
                        f"{what}: devices {missing} did not arrive within {self.timeout_s:g} s "
                        f"(NEURON_RT_EXEC_TIMEOUT)", devices=missing)
                    self._fail_locked(device, error)
                    raise error
                self._cond.wait(min(left, 3600.0))

    def _fail_locked(self, device: int, error: CollectiveError) -> None:
        if self._failure is None:
            self.origin = (device, error)
            self._failure = CollectiveError(f"device {device} failed: {error}", devices=error.devices,
                                            origin=device)
        self._cond.notify_all()

    def _mismatch(self, device: int, error: CollectiveError) -> CollectiveError:
        with self._cond:
            self._fail_locked(device, error)
        return error

    def _done_reading(self, device: int, seq: int, entries: dict[int, _Entry]) -> None:
        with self._cond:
            slot = self._slots.get(seq)
            if slot is None:
                return
            for d, e in entries.items():
                e.readers.discard(device)
                if not e.readers and slot.get(d) is e:
                    del slot[d]
            if not slot:
                del self._slots[seq]

    def _check_group(self, device: int, group: tuple[int, ...], op: str) -> None:
        if device not in group:
            raise CollectiveError(f"{op}: device {device} gathers in group {list(group)} without being in it")
        bad = [d for d in group if not 0 <= d < self.world_size]
        if bad:
            raise CollectiveError(f"{op}: group {list(group)} names devices {bad} of a world of "
                                  f"{self.world_size}", devices=bad)

    def _meet(self, device: int, seq: int, kind: str, group: tuple[int, ...], value: object,
              op: str) -> dict[int, _Entry]:
        """Deposit `value` (a gather's array, an all-to-all's pieces) and wait for the group's."""
        self._deposit(device, seq, _Entry(kind, group, op, value, readers=set(group)))  # type: ignore[arg-type]
        what = f"{op} (call {seq}) in group {list(group)}"

        def check(d: int, e: _Entry) -> None:
            if e.kind != kind or e.key != group or e.op != op:
                other = f"{e.op} in group {list(e.key)}" if e.kind != "permute" else f"{e.op} (a permute)"
                raise self._mismatch(device, CollectiveError(
                    f"mismatched collectives at call {seq}: device {device} runs {op} in group "
                    f"{list(group)}, device {d} runs {other}", devices=[d]))
        return self._wait(device, seq, group, check, what)

    def all_gather(self, device: int, seq: int, group: tuple[int, ...], value: np.ndarray,
                   op: str) -> list[np.ndarray]:
        self._check_group(device, group, op)
        if len(group) == 1:
            with self._cond:
                self._raise_if_failed(device)
            return [value]
        entries = self._meet(device, seq, "gather", group, _private(value, len(group)), op)
        values = [entries[d].value for d in group]
        self._done_reading(device, seq, entries)
        return values  # type: ignore[return-value]

    def all_to_all(self, device: int, seq: int, group: tuple[int, ...], pieces: Sequence[np.ndarray],
                   op: str) -> list[np.ndarray]:
        """pieces[i] to group[i]; each piece is copied once (its one reader may keep it)."""
        self._check_group(device, group, op)
        if len(pieces) != len(group):
            raise CollectiveError(f"{op}: {len(pieces)} pieces for a group of {len(group)} devices {list(group)}")
        if len(group) == 1:
            with self._cond:
                self._raise_if_failed(device)
            return [pieces[0]]
        me = group.index(device)
        entries = self._meet(device, seq, "all-to-all", group,
                             [p if i == me else _private(p, 1) for i, p in enumerate(pieces)], op)
        values = [entries[d].value[me] for d in group]  # type: ignore[index]
        self._done_reading(device, seq, entries)
        return values

    def permute(self, device: int, seq: int, pairs: Sequence[tuple[int, int]], value: np.ndarray,
                op: str) -> np.ndarray | None:
        key = tuple((int(s), int(t)) for s, t in pairs)
        targets = [t for s, t in key if s == device]
        sources = [s for s, t in key if t == device]
        if targets:
            self._deposit(device, seq, _Entry("permute", key, op, _private(value, 1), readers=set(targets)))
        else:
            with self._cond:
                self._raise_if_failed(device)
        if not sources:
            return None
        (source,) = sources
        if source == device:
            return np.array(value, copy=True)

        def check(d: int, e: _Entry) -> None:
            if e.kind != "permute" or e.key != key or e.op != op:
                raise self._mismatch(device, CollectiveError(
                    f"mismatched collectives at call {seq}: device {device} runs {op}, its source device {d} "
                    f"runs {e.op}{'' if e.kind == 'permute' else ' (a gather)'}", devices=[d]))
        entries = self._wait(device, seq, [source], check, f"{op} (call {seq}) from device {source}")
        received = entries[source].value
        self._done_reading(device, seq, entries)
        return received


class ThreadEndpoint:
    """Device `device`'s Communicator over a ThreadCommunicator: numbers its calls."""

    def __init__(self, world: ThreadCommunicator, device: int) -> None:
        self.world = world
        self.device = device
        self.world_size = world.world_size
        self._seq = 0

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def all_gather(self, group: tuple[int, ...], value: np.ndarray, *, op: str = "",
                   out: np.ndarray | None = None,
                   shapes: Sequence[tuple[int, ...]] | None = None) -> list[np.ndarray]:
        """(`shapes` changes nothing here: threads exchange arrays, not announcements.)"""
        return gather_into(out, self.world.all_gather(self.device, self._next(), tuple(group), value,
                                                      op or "a collective"))

    def all_to_all(self, group: tuple[int, ...], pieces: Sequence[np.ndarray], *, op: str = "") -> list[np.ndarray]:
        return self.world.all_to_all(self.device, self._next(), tuple(group), pieces, op or "a collective")

    def permute(self, pairs: Sequence[tuple[int, int]], value: np.ndarray, *, op: str = "") -> np.ndarray | None:
        return self.world.permute(self.device, self._next(), pairs, value, op or "a collective")

    def reduce(self, group: tuple[int, ...], value: np.ndarray, reducer: str, *, op: str = "") -> np.ndarray | None:
        """Threads have no reduction of their own: folding the deposited values is the caller's."""
        return None

    def abort(self, error: BaseException) -> None:
        self.world.abort(self.device, error)
