"""What a collective asks of the other devices: the Communicator protocol and its errors.

Why a protocol of three primitives: every HLO collective is, on the emulator, an exchange of
arrays followed by local NumPy work (reduce in group order, concatenate, pick a chunk). Keeping
the transport to `all_gather`, `all_to_all` and `permute` lets threads of one process (local.py)
and processes on torch.distributed (neuron_customcall/distributed) implement it without knowing
any HLO semantics. `all_to_all` (a distinct piece for each member) is what makes the reducing
collectives move (n-1)/n of the bytes instead of n-1 times them: reduce-scatter is an all_to_all
of the pieces then a fold, all-reduce that followed by an all_gather of the folded pieces.

A Communicator is one device's endpoint: it knows its own flat device id (replica *
num_partitions + partition) and numbers its calls. The k-th call of every device belongs to the
same exchange; each call carries a description of the instruction (`op`), so participants that
reached different instructions at the same sequence number fail with a CollectiveError instead of
exchanging values that do not belong together.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from emulator.errors import EmulatorError


class CollectiveError(EmulatorError):
    """A collective could not complete: a participant failed, disagreed or never arrived.

    `devices`: the flat device ids at fault (that failed, or did not arrive); `origin`: the
    device whose own failure caused this one (None when this device is the origin)."""

    def __init__(self, message: str, *, devices: Sequence[int] = (), origin: int | None = None) -> None:
        super().__init__(message)
        self.devices = tuple(devices)
        self.origin = origin


class CollectiveTimeout(CollectiveError):
    """Some participants of a collective did not arrive within the timeout."""


@runtime_checkable
class Communicator(Protocol):
    """One device's view of the world of devices (see the module docstring).

    Arrays `all_gather` returns are for reading only: they may be another device's deposited copy
    or the caller's own value, so a handler builds its result as a new array. The array `permute`
    returns is the caller's own (each source has one target)."""

    device: int
    world_size: int

    def all_gather(self, group: tuple[int, ...], value: np.ndarray, *, op: str = "",
                   out: np.ndarray | None = None,
                   shapes: Sequence[tuple[int, ...]] | None = None) -> list[np.ndarray]:
        """Every member's `value`, in `group` order (this device is a member). With `out` (1-d,
        the members' sizes in total) the values land in it one after another, flattened, and
        the list holds views of it; `value` may already be its own slice (see `gather_into`).
        `shapes`: every member's value shape, when the caller knows them from an exchange of the
        same call that already checked instruction, type and shapes (the all-gather phase of a
        chunked all-reduce); a transport may then skip announcing them."""
        ...

    def all_to_all(self, group: tuple[int, ...], pieces: Sequence[np.ndarray], *, op: str = "") -> list[np.ndarray]:
        """pieces[i] goes to group[i]; returns what every member sent to this device, in `group`
        order. Pieces share one dtype; their shapes may differ (uneven chunks, ragged rows)."""
        ...

    def permute(self, pairs: Sequence[tuple[int, int]], value: np.ndarray, *, op: str = "") -> np.ndarray | None:
        """Send `value` to this device's targets in (source, target) `pairs`; return what this device
        receives, or None when it is no pair's target."""
        ...

    def reduce(self, group: tuple[int, ...], value: np.ndarray, reducer: str, *, op: str = "") -> np.ndarray | None:
        """The group's reduction of `value` by a recognised reducer (emulator.ops.common.REDUCERS:
        "add", "multiply", "maximum", ...) done by the transport itself in one call, as a new
        array with the same bits on every member; or None (before any exchange, the same answer
        on every member) when the transport has no such reduction for this group, reducer and
        dtype: the caller then reduces from the other primitives in group order."""
        ...

    def abort(self, error: BaseException) -> None:
        """This device failed: every pending and future exchange of the world fails at once."""
        ...


def gather_into(out: np.ndarray | None, values: Sequence[np.ndarray]) -> list[np.ndarray]:
    """`values` (the members' values, in group order) flattened one after another into `out`,
    returned as views of it; a value that already is its slice is not copied (a receiver may
    have written it there). Without `out`, `values` as they are."""
    if out is None:
        return list(values)
    sizes = [int(np.asarray(v).size) for v in values]
    if out.ndim != 1 or sum(sizes) != out.size:
        raise CollectiveError(f"gathering {sum(sizes)} elements into an array of shape {list(out.shape)}")
    views, start = [], 0
    for v, n in zip(values, sizes):
        v = np.asarray(v)
        view = out[start:start + n]
        if not (view.size and np.shares_memory(view, v) and v.__array_interface__["data"][0] ==
                view.__array_interface__["data"][0]):
            view[...] = v.reshape(-1)
        views.append(view.reshape(v.shape))
        start += n
    return views


class SoloCommunicator:
    """The world of one device (the default: one NeuronCore, replica 0 of 1, partition 0 of 1)."""

    device = 0
    world_size = 1

    def all_gather(self, group: tuple[int, ...], value: np.ndarray, *, op: str = "",
                   out: np.ndarray | None = None,
                   shapes: Sequence[tuple[int, ...]] | None = None) -> list[np.ndarray]:
        if tuple(group) != (0,):
            raise CollectiveError(f"{op or 'a collective'}: group {list(group)} in a world of one device",
                                  devices=[d for d in group if d != 0])
        return gather_into(out, [value])

    def all_to_all(self, group: tuple[int, ...], pieces: Sequence[np.ndarray], *, op: str = "") -> list[np.ndarray]:
        if len(pieces) != 1:
            raise CollectiveError(f"{op or 'a collective'}: {len(pieces)} pieces for a group of {len(group)}")
        return self.all_gather(group, pieces[0], op=op)

    def permute(self, pairs: Sequence[tuple[int, int]], value: np.ndarray, *, op: str = "") -> np.ndarray | None:
        bad = [p for p in pairs if tuple(p) != (0, 0)]
        if bad:
            raise CollectiveError(f"{op or 'a collective'}: pairs {bad} in a world of one device")
        return np.array(value, copy=True) if pairs else None

    def reduce(self, group: tuple[int, ...], value: np.ndarray, reducer: str, *, op: str = "") -> np.ndarray | None:
        """A world of one device reduces nothing: the caller's fold of its one value is the result."""
        return None

    def abort(self, error: BaseException) -> None:
        """Nothing waits on a world of one device."""
