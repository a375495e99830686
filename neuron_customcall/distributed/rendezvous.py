"""A gloo process group of its own for the processes of one run, found from the launcher's variables.

Why a group of its own, not torch.distributed's default one: the PJRT plugin runs collectives
inside programs the framework executes, while the user's script may have initialised (or will
initialise) the default group itself, with another backend (``init_process_group("xla")``) or at
another point of its program. A ProcessGroupGloo built on a store of its own touches nothing of
the user's: it is created when a program first needs it, by every process at the same collective.

Where its store lives, first match wins:

0. the framework's own key-value store, when it passed one at client creation (JAX after
   ``jax.distributed.initialize``; kv_store.py): no address or port of ours at all;
1. ``NEURON_RT_ROOT_COMM_ID=host:port`` (the Neuron runtime's root communicator address, which
   torch_xla's Neuron set-up writes): process 0 serves a TCPStore there, the others connect;
2. under ``torchrun`` (``TORCHELASTIC_USE_AGENT_STORE=True``): the launcher agent's own store at
   ``MASTER_ADDR:MASTER_PORT``, under a key prefix of this run and restart, so no port is opened;
3. otherwise an error that names the variables to set.
"""
from __future__ import annotations

import atexit
import contextlib
import datetime
import gc
import logging
import os
import threading
from collections.abc import Mapping
from typing import Any

from emulator.collectives.comm import CollectiveError

log = logging.getLogger(__name__)

#: key prefix in a shared store (torchrun's agent store serves the user's groups as well)
PREFIX = "neuron_customcall/pjrt"
#: Python stores kept alive for the groups built on them (one per group made here)
_KEEP: list[Any] = []


class _InUse:
    """GlooGroups.in_use's context manager, one per GlooGroups (it keeps no state of its own
    between enter and exit, so threads may share it): a class rather than a generator, since
    every gloo call enters one."""

    __slots__ = ("groups",)

    def __init__(self, groups: GlooGroups) -> None:
        self.groups = groups

    def __enter__(self) -> None:
        groups = self.groups
        with groups._lock:
            groups._pending += 1

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: Any) -> None:
        groups = self.groups
        if error is not None and not isinstance(error, CollectiveError):
            groups.failed = True
        with groups._lock:
            groups._pending -= 1


class GlooGroups:
    """Two gloo groups of the same processes: `data` carries values (payloads, gloo's own
    all_reduce), `control` the small headers that check them before. Why two: on one group's
    connections, a gloo all_reduce right after a small exchange with the same peer was 2-3x
    slower at 1 MB (1.5 -> 4.4 ms on localhost, benchmarks/collectives_gloo.md), and the header
    exchange precedes every value.

    Its users wrap every gloo call in `in_use()`, so that `detach()` knows whether a collective
    is pending or has failed: a ProcessGroupGloo's destructor waits for its queued work, which a
    dead or hung peer never lets finish, so only idle groups whose gloo calls all ended are
    closed (gloo_group's groups at exit: close_at_exit). A CollectiveError of ours raised inside
    `in_use` (a mismatch found while waiting) does not mark them failed: whoever raises it has
    ended the gloo calls it made (GlooCommunicator._release), or says it did not (`fail()`).

    `registered`: data and control were made by torch.distributed's new_group, which keeps them
    in its own tables; closing them at exit then goes through its destroy_process_group."""

    def __init__(self, data: Any, control: Any, store: Any = None,
                 timeout: datetime.timedelta | None = None, registered: bool = False) -> None:
        self._groups: tuple[Any, Any] | None = (data, control)
        self._in_use = _InUse(self)
        self._lock = threading.Lock()
        self._pending = 0
        self.failed = False
        self.registered = registered
        #: where more groups of the same processes meet (bucket_group) and where a member stuck in
        #: a gloo call says what it waits in (probe); None: neither (a plain ProcessGroup's groups)
        self.store = store
        self._timeout = timeout
        self._buckets: dict[tuple[str, str, int], Any] = {}
        #: gloo steps (an all_reduce, a round of point-to-point messages) made through these
        #: groups by every communicator of this process: the k-th of every member belong together
        self.steps = 0

    @property
    def can_bucket(self) -> bool:
        return self.store is not None

    def bucket_group(self, key: tuple[str, str, int]) -> Any | None:
        """The gloo group of all-reduces of this (dtype, reducer, element count) key
        (trailer.py), or None when there is none yet."""
        return self._buckets.get(key)

    def make_bucket_group(self, key: tuple[str, str, int]) -> Any | None:
        """A new gloo group for `key`, which every member makes at the same call (after agreeing
        on it); None past MAX_BUCKET_GROUPS (each holds threads and a connection per peer), the
        same answer on every member whose calls agreed so far. PAIR_KEY's group is made past it:
        it is one group for every two-process reduction, which has no other way through gloo."""
        import torch.distributed as dist

        if len(self._buckets) >= MAX_BUCKET_GROUPS and key != PAIR_KEY:
            return None
        data = self.data
        name = f"bucket{len(self._buckets)}"
        group = dist.ProcessGroupGloo(dist.PrefixStore(name, self.store), data.rank(), data.size(),
                                      self._timeout or datetime.timedelta(seconds=600))
        self._buckets[key] = group
        return group

    def probe(self, step: int, what: bytes) -> dict[int, bytes]:
        """Say, in the store, that this member waits at gloo step `step` in `what`; return what
        the others said of the same step (those that said anything): a member that waits in
        another group at the same step reached another collective."""
        data = self.data
        me, size = data.rank(), data.size()
        self.store.set(f"probe/{step}/{me}", what)
        keys = {r: f"probe/{step}/{r}" for r in range(size) if r != me}
        return {r: bytes(self.store.get(k)) for r, k in keys.items() if self.store.check([k])}

    @staticmethod
    def of(group: Any) -> GlooGroups:
        """`group` itself, or a plain ProcessGroup serving as both (headers share its connections)."""
        return group if isinstance(group, GlooGroups) else GlooGroups(group, group)

    def _get(self, index: int) -> Any:
        groups = self._groups
        if groups is None:
            raise CollectiveError("the neuron device's gloo groups were closed at exit: no collective can start now")
        return groups[index]

    @property
    def data(self) -> Any:
        return self._get(0)

    @property
    def control(self) -> Any:
        return self._get(1)

    @property
    def closed(self) -> bool:
        return self._groups is None

    def in_use(self) -> _InUse:
        """Around a gloo call: pending while inside; gloo's own exception (a closed connection, a
        timeout) or an interruption marks the groups failed, since gloo may still hold the call's
        work; a CollectiveError of ours does not (see the class)."""
        return self._in_use

    def fail(self) -> None:
        """A gloo call made through these groups may not have ended (its waits were given up)."""
        self.failed = True

    def detach(self) -> tuple[Any, ...] | str:
        """Take the ProcessGroupGloo (data, control, buckets) out of this object (later use raises a CollectiveError),
        unless a collective is pending or one failed; returns them (whoever drops the last
        reference runs their destructors, which stop gloo's threads), or why not."""
        with self._lock:
            if self._groups is None:
                return "closed before"
            if self._pending:
                return f"{self._pending} gloo call(s) pending"
            if self.failed:
                return "a collective over them failed (a peer may be dead or hung)"
            groups, self._groups = self._groups, None
            buckets, self._buckets = tuple(self._buckets.values()), {}
        return (*groups, *buckets)


#: gloo_group's groups, closed at exit (close_at_exit)
_LIVE: list[GlooGroups] = []
_exit_hook: list[bool] = []
#: groups exit could not close, kept for ever (_keep_for_ever)
_FOREVER: list[Any] = []
#: bucket groups (trailer.py) at most, per GlooGroups
MAX_BUCKET_GROUPS = 8
#: the key of the group in which two processes exchange whole values to reduce them
#: (GlooCommunicator's pair exchange: every size in one group, the size in the messages' tags)
PAIR_KEY = ("", "pair", 0)
#: how long exit waits for gloo's threads to stop (idle groups: 0.2-0.3 s measured on localhost)
CLOSE_TIMEOUT_S = 10.0


def _keep_for_ever(groups: GlooGroups) -> None:
    """Never destroy `groups`, not even in interpreter finalization: a ProcessGroupGloo destroyed
    there joins gloo's threads, which then drop their work's tensors without Python to take them
    (an abort, "terminate called without an active exception"), and its destructor waits for
    work a dead or hung peer never lets finish. The extra reference on the list outlives the
    module's own, which finalization drops; the process's exit ends gloo's threads."""
    if not _FOREVER:
        import ctypes

        ctypes.pythonapi.Py_IncRef(ctypes.py_object(_FOREVER))
    _FOREVER.append(groups)


def _unregister(detached: tuple[Any, ...], groups: GlooGroups) -> None:
    """Take data and control out of torch.distributed's tables when its new_group made them (a
    script that called destroy_process_group already did: nothing left to do)."""
    if not groups.registered:
        return
    import torch.distributed as dist

    for group in detached[:2]:
        with contextlib.suppress(Exception):  # destroyed before, or torch.distributed torn down
            dist.destroy_process_group(group)


def close_at_exit(timeout_s: float | None = None) -> None:
    """At interpreter exit: close the groups gloo_group made, so that gloo's worker threads stop
    while Python still runs (PyTorch asks every program to destroy its process groups: gloo
    threads alive in finalization can abort the process with "terminate called without an active
    exception"). Bounded: the destructors run in a helper thread, and exit goes on after
    `timeout_s` whatever they do. Groups with a pending or failed collective (a dead or hung
    peer) are kept for ever instead (_keep_for_ever), so that exit never waits on a dead peer;
    groups that reported a mismatch after ending their calls close like idle ones."""
    timeout_s = CLOSE_TIMEOUT_S if timeout_s is None else timeout_s
    held: list[tuple[Any, ...]] = []
    why = []
    for groups in _LIVE:
        detached = groups.detach()
        if isinstance(detached, str):
            why.append(detached)
            _keep_for_ever(groups)
        else:
            _unregister(detached, groups)
            held.append(detached)
    _LIVE.clear()
    detached = None  # no reference left in this thread
    if why:
        log.info("neuron device: gloo groups left open at exit: %s", "; ".join(why))
    if not held:
        return
    count = len(held)

    def drop() -> None:
        held.clear()  # the last references: the destructors run here, in this thread
        gc.collect()
    helper = threading.Thread(target=drop, name="neuron-gloo-close", daemon=True)
    helper.start()
    helper.join(timeout_s)
    if helper.is_alive():
        log.warning("neuron device: %d gloo group pair(s) still closing after %g s at exit", count, timeout_s)
    else:
        log.info("neuron device: closed %d gloo group pair(s) at exit", count)


class RendezvousError(CollectiveError):
    """The processes could not be joined into one group (no address, or a peer never came)."""


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise RendezvousError(f"NEURON_RT_ROOT_COMM_ID={text!r} is not host:port")
    return host.strip("[]"), int(port)


def _store(rank: int, world_size: int, timeout: datetime.timedelta, env: Mapping[str, str],
           kv: Any = None) -> tuple[Any, str]:
    """The store and a description of where it is."""
    import torch.distributed as dist

    if kv is not None:
        from neuron_customcall.distributed.kv_store import CallbackStore

        base = CallbackStore(kv, timeout)
        _KEEP.append(base)  # its Python object carries the overrides the C++ store calls (kv_store.py)
        return dist.PrefixStore(f"{PREFIX}/{world_size}", base), "the framework's key-value store (PJRT_Client_Create)"
    root = env.get("NEURON_RT_ROOT_COMM_ID", "").strip()
    if root:
        host, port = _address(root)
        store = dist.TCPStore(host, port, world_size, is_master=rank == 0, timeout=timeout, wait_for_workers=False)
        return dist.PrefixStore(PREFIX, store), f"NEURON_RT_ROOT_COMM_ID={root}"
    if env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true" and env.get("MASTER_ADDR") and \
            env.get("MASTER_PORT", "").isdigit():
        host, port = env["MASTER_ADDR"], int(env["MASTER_PORT"])
        store = dist.TCPStore(host, port, world_size, is_master=False, timeout=timeout, wait_for_workers=False)
        run = f"{env.get('TORCHELASTIC_RUN_ID', 'run')}/{env.get('TORCHELASTIC_RESTART_COUNT', '0')}"
        return dist.PrefixStore(f"{PREFIX}/{run}", store), f"torchrun's store at {host}:{port}"
    raise RendezvousError(
        "the neuron device's processes need a meeting point for their collectives: run under torchrun, "
        "or set NEURON_RT_ROOT_COMM_ID=host:port (process 0 listens there) in every process")


def gloo_group(rank: int, world_size: int, timeout_s: float, env: Mapping[str, str] | None = None,
               kv: Any = None) -> GlooGroups:
    """The ProcessGroupGloo pair (GlooGroups: values, headers) of `world_size` processes in which
    this one is `rank`; every process must call this (it waits for all of them, at most
    `timeout_s`). `kv`: the framework's key-value store functions, used before the environment
    when given."""
    import torch.distributed as dist

    env = os.environ if env is None else env
    if not dist.is_available():
        raise RendezvousError("collectives between processes need torch.distributed (gloo), which this torch lacks")
    timeout = datetime.timedelta(seconds=min(timeout_s, 10 * 365 * 86400))
    try:
        store, where = _store(rank, world_size, timeout, env, kv)
        group = GlooGroups(dist.ProcessGroupGloo(dist.PrefixStore("data", store), rank, world_size, timeout),
                           dist.ProcessGroupGloo(dist.PrefixStore("control", store), rank, world_size, timeout),
                           store, timeout)
    except RendezvousError:
        raise
    except Exception as e:  # noqa: BLE001 - the store's and gloo's errors: refused, timed out
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise RendezvousError(f"process {rank} of {world_size} could not join the others' gloo group: {first}") from e
    log.info("neuron device: process %d of %d joined its gloo group (%s)", rank, world_size, where)
    return close_at_exit_later(group)


def close_at_exit_later(groups: GlooGroups) -> GlooGroups:
    """Have close_at_exit close `groups` (and the bucket groups they will make)."""
    _LIVE.append(groups)
    if not _exit_hook:  # registered after the framework's own handlers, so it runs before them
        _exit_hook.append(True)
        atexit.register(close_at_exit)
    return groups
