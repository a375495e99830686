"""Which device the current thread runs as: a DeviceContext in a context variable.

Why a context variable and not a handler attribute: one loaded program serves every device, and
its handlers (replica-id, partition-id, the collectives) read the device at run time. Each thread
of run.py (and each PJRT execute on a device) runs under `running_as(ctx)`; code that sets
nothing runs as the only device (replica 0 of 1, partition 0 of 1)."""
from __future__ import annotations

import contextvars
from dataclasses import dataclass, field

from emulator.collectives.comm import Communicator, SoloCommunicator


@dataclass(frozen=True)
class DeviceContext:
    """A device as XLA's DeviceAssignment names it (logical ids), with its communicator."""

    replica_id: int
    partition_id: int
    num_replicas: int
    num_partitions: int
    communicator: Communicator
    #: values received at a `send` and not yet taken by their `recv-done`, per (channel, pairs),
    #: oldest first (emulator/ops/send_recv.py); one per device and run
    mailbox: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not (0 <= self.replica_id < self.num_replicas and 0 <= self.partition_id < self.num_partitions):
            raise ValueError(f"device (replica {self.replica_id}, partition {self.partition_id}) is outside "
                             f"{self.num_replicas} replicas x {self.num_partitions} partitions")

    @property
    def device(self) -> int:
        """The flat device id: replica * num_partitions + partition (XLA's flattened id)."""
        return self.replica_id * self.num_partitions + self.partition_id


SOLO = DeviceContext(0, 0, 1, 1, SoloCommunicator())
_CURRENT: contextvars.ContextVar[DeviceContext] = contextvars.ContextVar("emulator_device", default=SOLO)


def current() -> DeviceContext:
    """The device this thread (context) runs as."""
    return _CURRENT.get()


class running_as:  # noqa: N801 - used as a function: `with running_as(ctx):`
    """Run the body as device `ctx` (restored on exit). A class rather than a generator context
    manager: every run of a program with collectives enters one, and a small all-reduce's run is
    tens of microseconds in all (benchmarks/collectives_gloo.md)."""

    __slots__ = ("ctx", "_token")

    def __init__(self, ctx: DeviceContext) -> None:
        self.ctx = ctx

    def __enter__(self) -> DeviceContext:
        self._token = _CURRENT.set(self.ctx)
        return self.ctx

    def __exit__(self, *exc: object) -> None:
        _CURRENT.reset(self._token)
