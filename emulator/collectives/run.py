"""Run one loaded program on several emulated devices at once, each in its own thread.

Device d is (replica d // num_partitions, partition d % num_partitions), the logical ids of XLA's
DeviceAssignment. The threads share one ThreadCommunicator; NumPy releases the GIL in its array
work, so devices overlap where the host has cores. One Executable serves every device: handlers
read the device from the context variable (context.py), and each thread's run keeps its own
registers.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from emulator.collectives.comm import CollectiveError
from emulator.collectives.context import DeviceContext, running_as
from emulator.collectives.local import ThreadCommunicator
from emulator.errors import EmulatorError

log = logging.getLogger(__name__)


def run_devices(executable: Any, inputs_per_device: Sequence[Sequence[np.ndarray]], num_replicas: int,
                num_partitions: int, *, timeout_s: float | None = None, devices: Sequence[int] | None = None,
                communicator: Any = None) -> list[list[np.ndarray]]:
    """Each device's outputs of `executable` (anything with `run(inputs)`, e.g. an
    emulator.executor.Executable) run on its own inputs.

    `devices` runs only those logical ids here (one input list each), the others running
    elsewhere and reached through `communicator` (what ThreadCommunicator offers: endpoint(d),
    abort(d, error), origin; e.g. neuron_customcall.distributed's ProcessWorld); by default
    every device runs here over a ThreadCommunicator.

    The first real failure is re-raised as an EmulatorError naming its device (with the original
    as its cause); the CollectiveErrors it caused in the other devices are not."""
    world = num_replicas * num_partitions
    if num_replicas < 1 or num_partitions < 1:
        raise ValueError(f"{num_replicas} replicas x {num_partitions} partitions")
    here = list(range(world)) if devices is None else [int(d) for d in devices]
    if len(inputs_per_device) != len(here):
        raise ValueError(f"{len(inputs_per_device)} input lists for {len(here)} of the {num_replicas} replicas x "
                         f"{num_partitions} partitions ({world} devices)")
    comm = communicator if communicator is not None else ThreadCommunicator(world, timeout_s)
    results: list[list[np.ndarray] | None] = [None] * len(here)
    errors: list[BaseException | None] = [None] * world

    def device(k: int) -> None:
        d = here[k]
        ctx = DeviceContext(d // num_partitions, d % num_partitions, num_replicas, num_partitions,
                            comm.endpoint(d))
        try:
            with running_as(ctx):
                results[k] = executable.run(inputs_per_device[k])
        except BaseException as e:  # noqa: BLE001 - every failure must reach the other devices
            errors[d] = e
            comm.abort(d, e)

    if len(here) == 1:
        device(0)
    else:
        threads = [threading.Thread(target=device, args=(k,), name=f"emulator-device-{d}", daemon=True)
                   for k, d in enumerate(here)]
        for t in threads:
            t.start()
        _join(threads, comm)
    if any(e is not None for e in errors) or comm.origin is not None:
        raise _first_failure(errors, comm, num_partitions)
    return [r for r in results if r is not None]


#: Seconds the devices still running get to finish once the world failed (they stop at their
#: next collective; one stuck in a long computation is left behind, a daemon thread).
ABORT_GRACE_S = 2.0


def _join(threads: list[threading.Thread], comm: Any) -> None:
    """Wait for every device; once one failed, wait for the rest only ABORT_GRACE_S more, so a
    device that hangs outside any collective does not hang the caller after the others failed."""
    deadline = None
    for t in threads:
        while t.is_alive():
            if deadline is None and comm.origin is not None:
                deadline = time.monotonic() + ABORT_GRACE_S
            if deadline is not None and time.monotonic() >= deadline:
                stuck = [u.name for u in threads if u.is_alive()]
                log.warning("run_devices: %s still running after device %d failed; left behind", stuck,
                            comm.origin[0] if comm.origin else -1)
                return
            t.join(0.05 if deadline is None else max(0.0, min(0.05, deadline - time.monotonic())))


def _first_failure(errors: list[BaseException | None], comm: Any, num_partitions: int) -> BaseException:
    """The failure that started it all: the communicator's first abort, else any device's own."""
    if comm.origin is not None:
        d, error = comm.origin
    else:
        d, error = next((d, e) for d, e in enumerate(errors) if e is not None)
    if not isinstance(error, Exception):
        return error  # KeyboardInterrupt, SystemExit: as they are
    where = f"device {d} (replica {d // num_partitions}, partition {d % num_partitions})"
    log.debug("run_devices: %s failed first: %s", where, error)
    kind = type(error) if isinstance(error, CollectiveError) else EmulatorError
    wrapped = kind(f"{where}: {error}") if kind is EmulatorError else \
        kind(f"{where}: {error}", devices=error.devices, origin=d)  # type: ignore[union-attr]
    wrapped.__cause__ = error
    return wrapped
