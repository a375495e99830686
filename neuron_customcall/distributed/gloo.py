"""The emulator's Communicator over torch.distributed (gloo): one emulated device per process.

Why torch.distributed and gloo: it is an existing, maintained transport (TCP between processes
and hosts) with the rendezvous every training script already uses (`torchrun`: MASTER_ADDR,
MASTER_PORT, RANK, WORLD_SIZE), so nothing here opens a socket of its own. Nothing crossing the
process boundary is pickled: each exchange is point-to-point tensor messages (isend/irecv, tagged
by the call's number) between the devices that need each other's values (a gather group's
members; a permute's sources and targets), first a fixed header of integers, then the value's
bytes. Point-to-point needs no sub-group (which torch.distributed can only create with every rank
taking part, in the same order), and gloo's own all_gather was several times slower on localhost.

The header carries the call's sequence number, digests of the instruction and of its group (or
pairs), and the value's byte count, dtype and shape: devices that reached different collectives, or that hold
values of different types, fail with a CollectiveError naming the devices instead of exchanging
bytes that do not belong together. An all-reduce between two processes is a pair exchange: each
sends the other its whole value, tagged by its size, with its header beside it rather than before
it, and folds the two (GlooCommunicator._reduce_in_pair). Among more processes, a small
all-reduce gloo can compute goes to gloo's own all_reduce without a header: its size bucket's own
group and a trailer checked after the call (trailer.py) keep gloo's size-mismatch abort out of
reach (GlooCommunicator.reduce). A peer that died ends the exchange with gloo's error (a closed
connection) or, if it hangs, after the group's timeout (NEURON_RT_EXEC_TIMEOUT, emulator's default
600 s), also as a CollectiveError.
"""
from __future__ import annotations

import contextlib
import datetime
import hashlib
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from emulator.collectives.comm import CollectiveError, CollectiveTimeout, gather_into
from emulator.collectives.context import DeviceContext, running_as
from emulator.collectives.local import ThreadCommunicator, default_timeout
from emulator.ops.common import REDUCERS, compute_dtype, reducer_ufunc
from neuron_customcall.distributed import trailer
from neuron_customcall.distributed.blocks import Block, BlockPool
from neuron_customcall.distributed.polling import PolledWait, window_from_env
from neuron_customcall.distributed.rendezvous import PAIR_KEY, GlooGroups, close_at_exit_later

log = logging.getLogger(__name__)

#: header: sequence, instruction digest, group digest, kind (1 gather, 2 permute, 3 all-to-all, 4 reduce,
#: 5 a pair exchange's, sent beside its value: GlooCommunicator._reduce_in_pair),
#: byte count, dtype digest, ndim, then up to _MAX_DIMS dimensions
_MAX_DIMS = 16
_HEADER = 7 + _MAX_DIMS
_GATHER, _PERMUTE, _ALL_TO_ALL, _REDUCE, _PAIR = 1, 2, 3, 4, 5

#: The reductions gloo's all_reduce does as XLA does, by dtype kind: reducer name (emulator.ops.common.REDUCERS)
#: -> torch.distributed.ReduceOp name. Floats: only add and multiply (gloo's MIN/MAX are std::min/max,
#: which drop a NaN that XLA's maximum/minimum propagate). Integers: two's complement, as XLA wraps.
_NATIVE_REDUCERS = {
    "f": {"add": "SUM", "multiply": "PRODUCT"},
    "iu": {"add": "SUM", "multiply": "PRODUCT", "maximum": "MAX", "minimum": "MIN", "and": "BAND", "or": "BOR",
           "xor": "BXOR"},
}
#: Values of this many bytes or more are not given to gloo's all_reduce: it reduces in place, so
#: the operand must first be copied into the result (a bucket's buffer), where the chunked path's
#: fold writes the result once; measured (benchmarks/collectives_gloo.md) the copy cost more than
#: the round trips saved from 8 MB up (session 12, into reused buffers; 64 MB: 61 ms of CPU against
#: 51 in session 10, into fresh ones), while below it the round trips dominate (4 MB: 4.1-4.7 ms of
#: CPU against the chunked path's 4.9-5.6, session 12).
NATIVE_MAX_BYTES = 6 << 20
#: Two processes reduce a value of up to this many bytes by sending each other the whole of it
#: and folding the two in group order (GlooCommunicator._reduce_in_pair), by every reducer XLA
#: names and every type that computes in itself. Why not gloo's all_reduce for them: it
#: reduces in place, so the operand had to be copied into a bucket first, and the bucket's
#: trailer took a 4 MB value past the size at which gloo's ring cuts its buffer into more
#: segments (0.2-0.5 ms more a call). One message each way, received into the result and folded
#: there, copies nothing and was faster than gloo's own all_reduce from 1 to 256 MB
#: (benchmarks/collectives_gloo.md, session 15): as many bytes cross as in gloo's ring, in one
#: step instead of two. The bound keeps the messages' tags (_pair_tag) within 31 bits.
PAIR_MAX_BYTES = 512 << 20
#: the reducers a pair exchange folds on integer and bool values only
_BITWISE = frozenset({"and", "or", "xor"})
#: A bucket's all_reduce waits this long before its member says in the store where it waits
#: (GlooCommunicator._wait), then checks the others' word this often.
PROBE_AFTER_S = 1.0
PROBE_EVERY_S = 0.25
_PROBE_AFTER, _PROBE_EVERY = datetime.timedelta(seconds=PROBE_AFTER_S), datetime.timedelta(seconds=PROBE_EVERY_S)
#: how long a member that found a mismatch waits for the calls it released (_release)
RELEASE_WAIT_S = 10.0
#: The dtypes ProcessGroupGloo reduces (int16 and the unsigned 16-64 bit types it refuses; the narrow
#: floats it would accumulate in their own type, where XLA:CPU accumulates in f32 and rounds once).
_NATIVE_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int8, np.uint8, np.int32, np.int64))


def _digest(text: str) -> int:
    """A stable 62-bit digest (Python's hash() differs between processes)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 2


#: odd, so that a call number's multiple differs for every number below 2**64 (Knuth's golden ratio)
_MIX = 0x9E3779B97F4A7C15


def _mix(base: int, seq: int) -> int:
    """The 64-bit digest of call `seq` of a reduction whose digest is `base`: two calls' differ
    whenever their numbers do and their bases are equal (the multiple is a bijection mod 2**64),
    and otherwise as two random numbers do. Integer arithmetic: hashing a text per call cost
    ~20 us between two gloo calls (cold caches)."""
    return base ^ ((seq * _MIX) & 0xFFFFFFFFFFFFFFFF)


_default_stores: list[Any] = []


class _Probe(NamedTuple):
    """What a member waiting in a reduction says in its groups' store (GlooGroups.probe): the
    reduction's number among the groups' reductions (`step`), what it is (`what`: the same text
    on every member of the same collective), and where it waits (`where`: "B dtype reducer size",
    a bucket's all_reduce, or "H seq device", a header exchange), which says how to release it.
    A tuple: one is made for every reduction, and read only by a wait that lasts past
    PROBE_AFTER_S."""

    groups: GlooGroups
    step: int
    what: str
    where: str


@dataclass(frozen=True)
class _BucketCall:
    """One instruction's all-reduce in a bucket (GlooCommunicator.reduce: the same group, reducer, op, dtype
    and shape every call), with what every call of it repeats worked out once: the bucket's key and
    gloo options, the texts its digest and probe are made of, its buffers. Kept per
    communicator; `direct` ones (this process's only device of the group) are what GlooCommunicator.reduce
    finds first, before any check, since the checks' answers are fixed by the same key."""

    groups: GlooGroups
    key: tuple[str, str, int]  # the bucket's (its group: groups.bucket_group(key), not held here, so
    # that exit's close_at_exit drops the last reference to it while Python still runs)
    size: int  # the bucket's element count (the trailer follows)
    shape: tuple[int, ...]
    reducer: str
    options: Any  # torch.distributed.AllreduceOptions
    op: str
    peers: tuple[int, ...]
    base: int  # the digest of the instruction, group, reducer, dtype and shape; a call's mixes in its number (_mix)
    said: str  # what its probe says it waits in, after "call {seq}: "
    where: str  # and where (_Probe)
    pool: BlockPool
    count: int  # elements of the value (math.prod(shape))
    trailer: trailer.Codec
    waits: PolledWait  # whether its calls end soon enough to poll them (polling.py)


@dataclass(frozen=True)
class _PairCall:
    """One instruction's all-reduce between two processes (GlooCommunicator._reduce_in_pair: the
    same group, reducer, op, dtype and shape every call), with what every call of it repeats
    worked out once, as _BucketCall does for a bucket's."""

    groups: GlooGroups
    key: tuple[str, str, int]  # PAIR_KEY: the group (groups.bucket_group(key)), not held here
    shape: tuple[int, ...]
    dtype: np.dtype
    op: str
    peers: tuple[int, ...]  # the other process's device
    rank: int  # its process
    header: Block  # this call's header (_announce's fields, kind _PAIR), its sequence number set per call
    got: Block  # the other's header
    results: BlockPool
    count: int
    nbytes: int
    ufunc: Any  # the reducer's NumPy ufunc
    first: bool  # this process's value comes first in group order
    waits: PolledWait


def _pair_tag(nbytes: int) -> int:
    """The tag of a pair exchange's value of `nbytes` bytes: values of different sizes never
    meet, since gloo aborts the process when a message and the receive it meets differ in size."""
    return nbytes


def _pairable(value: np.ndarray, reducer: str, max_bytes: int) -> bool:
    """Whether two processes can reduce `value` by `reducer` in a pair exchange: a reducer XLA
    names, a type that computes in itself (the narrow floats accumulate in f32), a size up to
    `max_bytes` (PAIR_MAX_BYTES)."""
    dtype = value.dtype
    return (reducer in REDUCERS and 0 < value.nbytes <= max_bytes and compute_dtype(dtype) == dtype
            and dtype.kind in "biufc" and (reducer not in _BITWISE or dtype.kind in "biu")
            and (dtype.kind != "c" or reducer in ("add", "multiply")))


def _torch_dtype(torch: Any, text: str) -> Any:
    """The torch dtype of a NumPy dtype string (a bucket key's)."""
    return torch.from_numpy(np.empty(0, np.dtype(text))).dtype


def _default_store() -> Any:
    """A store of its own, in torch.distributed's default one, for the groups of a communicator
    made on the default group (its bucket groups, its probes): every rank makes its communicators
    in the same order, as torch.distributed's new_group asks. None if this torch has none to give."""
    import torch.distributed as dist

    try:
        base = dist.distributed_c10d._get_default_store()
    except Exception:  # noqa: BLE001 - a private function of torch.distributed; without it, no buckets
        log.info("torch.distributed's default store is not reachable: all-reduces exchange headers first")
        return None
    _default_stores.append(base)
    return dist.PrefixStore(f"neuron_customcall/communicator{len(_default_stores)}", base)


class GlooCommunicator:
    """One device's endpoint in a world of devices spread over processes. By default device =
    rank of torch.distributed's default group (initialised before: torchrun, or
    init_process_group), over two gloo groups built from it (rendezvous.GlooGroups: values and
    headers), which every rank must build at the same point of its program. With `group` (a
    ProcessGroup, a GlooGroups, e.g. rendezvous.gloo_group's, or a callable making either) and
    `device_ranks` (the rank of each logical device), devices are a program's logical ids; a
    process holding several (`device` names this endpoint's) exchanges between them through
    `local`, a ThreadCommunicator over the logical ids that ProcessWorld gives each run."""

    def __init__(self, timeout_s: float | None = None, *, group: Any = None,
                 device_ranks: Sequence[int] | None = None, rank: int | None = None,
                 device: int | None = None) -> None:
        import torch.distributed as dist

        self.timeout_s = default_timeout() if timeout_s is None else float(timeout_s)
        if group is None:
            if not dist.is_available() or not dist.is_initialized():
                raise CollectiveError("GlooCommunicator needs an initialised torch.distributed process group "
                                      "(run under torchrun, or call torch.distributed.init_process_group first)")
            timeout = datetime.timedelta(seconds=min(self.timeout_s, 10 * 365 * 86400))
            # torch.distributed's destroy_process_group ends the two groups, not the bucket groups
            # made here: those close at exit like the plugin's own (rendezvous.close_at_exit)
            group = close_at_exit_later(GlooGroups(dist.new_group(backend="gloo", timeout=timeout),
                                                   dist.new_group(backend="gloo", timeout=timeout), _default_store(),
                                                   timeout, registered=True))
        # a callable is a group made on the first exchange: a program without collectives, or
        # one that a single process runs, never waits for the others to join
        self._groups, self._make_group = (None, group) if callable(group) else (GlooGroups.of(group), None)
        first = self._groups.data if self._groups is not None else None
        if rank is None:
            if first is None:
                raise CollectiveError("GlooCommunicator: a group made later needs this process's rank")
            rank = first.rank()
        size = first.size() if first is not None else None
        self._ranks = tuple(int(r) for r in device_ranks) if device_ranks is not None else tuple(range(size or 0))
        if any(r < 0 or (size and r >= size) for r in self._ranks):
            raise CollectiveError(f"devices on processes {list(self._ranks)} of a group of {size}")
        mine = [d for d, r in enumerate(self._ranks) if r == rank]
        if device is None:
            if len(mine) != 1:
                raise CollectiveError(f"process {rank} holds devices {mine} (devices on processes "
                                      f"{list(self._ranks)}): name the endpoint's device")
            device = mine[0]
        if device not in mine:
            raise CollectiveError(f"device {device} is not one of process {rank}'s {mine}")
        self.device = int(device)
        self.rank = rank
        self.world_size = len(self._ranks)
        #: this process's other devices of the world, reached through `local` (ProcessWorld sets it)
        self.local: Any = None
        self._seq = 0
        self._failure: CollectiveError | None = None
        #: (group, dtype, shape, reducer, op) -> its bucket call or pair exchange (_BucketCall,
        #: _PairCall); `_direct`: those reduce takes at once (this process's only device of the group);
        #: `_pools`: the buckets' buffers and the pair exchanges' results
        self._calls: dict[tuple[Any, ...], _BucketCall | _PairCall] = {}
        self._direct: dict[tuple[Any, ...], _BucketCall | _PairCall] = {}
        self._pools: dict[tuple[str, str, int], BlockPool] = {}
        self._poll_window = window_from_env()
        #: the largest value two processes reduce in a pair exchange (0: none; the benchmark's A/B)
        self._pair_max = PAIR_MAX_BYTES

    def _process_groups(self) -> GlooGroups:
        if self._groups is None:
            groups = GlooGroups.of(self._make_group())
            if max(self._ranks) >= groups.data.size():
                raise self._fail(CollectiveError(f"devices on processes {list(self._ranks)}; the group has "
                                                 f"{groups.data.size()}"))
            self._groups = groups
        return self._groups

    # -- the protocol ------------------------------------------------------------------------------
    def all_gather(self, group: tuple[int, ...], value: np.ndarray, *, op: str = "",
                   out: np.ndarray | None = None,
                   shapes: Sequence[tuple[int, ...]] | None = None) -> list[np.ndarray]:
        group = tuple(int(d) for d in group)
        op = op or "a collective"
        self._check_group(group, op)
        self._seq += 1
        local = tuple(d for d in group if self._ranks[d] == self.rank)
        values: dict[int, np.ndarray] = {self.device: value}
        if len(local) > 1:
            values.update(zip(local, self._local().all_gather(self.device, self._seq, local, value, op)))
        peers = tuple(d for d in group if self._ranks[d] != self.rank)

        def place(shapes: dict[int, tuple[int, ...]]) -> dict[int, np.ndarray] | None:
            """The peers' values received straight into their slices of `out`."""
            if out is None:
                return None
            sizes = [int(np.asarray(values[d]).size) if d in values else math.prod(shapes[d]) for d in group]
            if sum(sizes) != out.size or out.ndim != 1:
                raise self._fail(CollectiveError(f"{op}: gathering {sum(sizes)} elements into an array of shape "
                                                 f"{list(out.shape)}"))
            starts = np.cumsum([0, *sizes])
            return {d: out[starts[k]:starts[k + 1]].reshape(shapes[d]) for k, d in enumerate(group) if d in shapes}
        known = {d: tuple(shapes[group.index(d)]) for d in peers} if shapes is not None else None
        values.update(self._exchange(_GATHER, f"{op} {group}", dict.fromkeys(peers, value), value, op,
                                     receive_from=peers, place=place, known=known))
        return gather_into(out, [values[d] for d in group])

    def all_to_all(self, group: tuple[int, ...], pieces: Sequence[np.ndarray], *, op: str = "") -> list[np.ndarray]:
        group = tuple(int(d) for d in group)
        op = op or "a collective"
        self._check_group(group, op)
        if len(pieces) != len(group):
            raise CollectiveError(f"{op}: {len(pieces)} pieces for a group of {len(group)} devices {list(group)}")
        self._seq += 1
        local = tuple(d for d in group if self._ranks[d] == self.rank)
        values: dict[int, np.ndarray] = {}
        if len(local) > 1:
            mine = [pieces[group.index(d)] for d in local]
            values.update(zip(local, self._local().all_to_all(self.device, self._seq, local, mine, op)))
        peers = tuple(d for d in group if self._ranks[d] != self.rank)
        sends = {d: np.asarray(pieces[group.index(d)]) for d in peers}
        values.update(self._exchange(_ALL_TO_ALL, f"{op} {group}", sends, np.asarray(pieces[0]), op,
                                     receive_from=peers))
        return [pieces[i] if d == self.device else values[d] for i, d in enumerate(group)]

    def _check_group(self, group: tuple[int, ...], op: str) -> None:
        if self.device not in group:
            raise CollectiveError(f"{op}: device {self.device} gathers in group {list(group)} without being in it")
        bad = [d for d in group if not 0 <= d < self.world_size]
        if bad:
            raise CollectiveError(f"{op}: group {list(group)} names devices {bad} of a world of "
                                  f"{self.world_size} processes", devices=bad)

    def permute(self, pairs: Sequence[tuple[int, int]], value: np.ndarray, *, op: str = "") -> np.ndarray | None:
        key = tuple((int(s), int(t)) for s, t in pairs)
        op = op or "a collective"
        self._seq += 1
        here = self._ranks[self.device]
        between = tuple((s, t) for s, t in key if self._ranks[s] == here and self._ranks[t] == here)
        local_value = None
        if between and len(self._local_devices()) > 1:  # every local device makes this call
            local_value = self._local().permute(self.device, self._seq, between, value, op)
        targets = tuple(t for s, t in key if s == self.device and self._ranks[t] != here)
        sources = [s for s, t in key if t == self.device]
        values = self._exchange(_PERMUTE, f"{op} {key}", dict.fromkeys(targets, value), value, op,
                                receive_from=tuple(s for s in sources if self._ranks[s] != here))
        if not sources:
            return None
        if sources[0] == self.device:
            return np.array(value, copy=True)
        return local_value if self._ranks[sources[0]] == here else np.array(values[sources[0]], copy=True)

    def reduce(self, group: tuple[int, ...], value: np.ndarray, reducer: str, *, op: str = "") -> np.ndarray | None:
        """The group's reduction of `value` in one step whose waits are in C++, instead of a
        reduce-scatter and an all-gather each waited for from Python, when the group is every
        device of the world (one per process, or several: _reduce_local_first); else None, and
        the caller reduce-scatters and all-gathers. Between two processes (with a store to make
        groups), a pair exchange (_reduce_in_pair: every reducer XLA names, every type that
        computes in itself, up to PAIR_MAX_BYTES). Among more, gloo's own all_reduce, below
        NATIVE_MAX_BYTES where gloo reduces as XLA does (_NATIVE_REDUCERS, _NATIVE_DTYPES).
        gloo aborts the process on a size mismatch, so sizes must agree before gloo sees them:
        when the groups can make more groups (a store), the value is padded to a bucket with a
        group of its own and checked after the reduction by a trailer (trailer.py: no exchange
        before, one gloo call in all); the first call of a bucket, or past the groups' cap of
        buckets, the members first exchange headers (instruction, group, kind, dtype, shape), as
        they do at the first pair exchange of the world. Every member gets the same bits (the
        group-order fold's for two members; for more, in the order of gloo's ring). A call
        repeating one (the same group, reducer, op, dtype and shape) skips the checks whose
        answers its first call fixed (_BucketCall, _PairCall)."""
        value = np.asarray(value)
        op = op or "a collective"
        if type(group) is tuple:
            call = self._direct.get((group, value.dtype, value.shape, reducer, op))
            bucket = call.groups.bucket_group(call.key) if call is not None else None  # None once closed
            if bucket is not None:
                return self._reduce_again(call, bucket, value)
        group = tuple(int(d) for d in group)
        self._check_group(group, op)
        names = _NATIVE_REDUCERS["f" if value.dtype.kind == "f" else "iu"] if value.dtype in _NATIVE_DTYPES else {}
        native = reducer in names and 0 < value.nbytes < NATIVE_MAX_BYTES
        pairable = _pairable(value, reducer, self._pair_max)
        if not (native or pairable) or value.ndim > _MAX_DIMS or len(set(group)) != len(group) or len(group) < 2:
            return None
        groups = self._process_groups()
        processes = groups.data.size()
        several = len(set(self._ranks)) != len(self._ranks)
        if (len(group) != self.world_size or processes < 2) if several else len(group) != processes:
            return None  # a sub-group: the chunked path (gloo's groups are every process)
        pair = pairable and processes == 2 and groups.can_bucket
        if not (native or pair):
            return None
        local = tuple(d for d in group if self._ranks[d] == self.rank)
        if len(local) == 1:
            return self._reduce_over_processes(groups, group, value, reducer, op, names, direct=True, pair=pair)
        return self._reduce_local_first(groups, group, local, value, reducer, op, names, pair)

    def _reduce_local_first(self, groups: GlooGroups, group: tuple[int, ...], local: tuple[int, ...],
                            value: np.ndarray, reducer: str, op: str, names: dict[str, str],
                            pair: bool) -> np.ndarray:
        """This process holds several of the group's devices: they fold their values here (in
        group order), the first of them reduces the fold over the processes with gloo, and the
        others take a copy of its result. Every device's call numbers advance alike (three calls),
        so the exchanges after this one keep their tags. XLA leaves the order of a reduction
        open: floats match the group-order fold within rounding, integers exactly."""
        self._seq += 1
        values = self._local().all_gather(self.device, self._seq, local, value, op)
        result = None
        if self.device == local[0]:
            folded = np.array(values[0], copy=True)
            for v in values[1:]:
                reducer_ufunc(reducer, folded.dtype)(folded, v, out=folded)  # in place
            result = self._reduce_over_processes(groups, group, folded, reducer, op, names, pair=pair)
        else:
            self._seq += 1  # the first device's call over the processes
        self._seq += 1
        shared = self._local().all_gather(self.device, self._seq, local, result if result is not None else value, op)
        return result if result is not None else np.array(shared[0], copy=True)

    def _reduce_over_processes(self, groups: GlooGroups, group: tuple[int, ...], value: np.ndarray, reducer: str,
                               op: str, names: dict[str, str], direct: bool = False, pair: bool = False) -> np.ndarray:
        """`value` (this process's part) reduced with the other processes' by gloo's all_reduce,
        or with the one other process's by a pair exchange (`pair`: _reduce_in_pair), by this
        process's first device of `group` with the other processes' first devices. `direct`:
        this device is its process's only one in `group` (reduce may repeat the call at once:
        _reduce_again)."""
        import torch
        import torch.distributed as dist

        self._seq += 1
        if self._failure is not None:
            raise CollectiveError(str(self._failure), devices=self._failure.devices, origin=self._failure.origin)
        firsts: dict[int, int] = {}
        for d in group:
            firsts.setdefault(self._ranks[d], d)
        peers = tuple(d for d in firsts.values() if d != self.device)
        what = f"{op} {group} {reducer}"
        options = None
        if pair:
            key: tuple[str, str, int] | None = PAIR_KEY
        else:
            options = dist.AllreduceOptions()
            options.reduceOp = getattr(dist.ReduceOp, names[reducer])
            key = (value.dtype.str, reducer, trailer.bucket(value.size)) \
                if groups.can_bucket and trailer.supported(reducer, len(peers) + 1) else None
        bucket = groups.bucket_group(key) if key is not None else None
        # the k-th reduction over the groups on every member, checked by probes while it waits
        groups.steps += 1
        probe = _Probe(groups, groups.steps, f"call {self._seq}: {what} {value.dtype}{list(value.shape)}",
                       f"B {' '.join(map(str, key))}" if bucket is not None else f"H {self._seq} {self.device}") \
            if groups.can_bucket else None
        if bucket is not None:
            return self._reduce_in(groups, key, bucket, group, value, reducer, what, options, op, peers, direct, probe)
        result = np.empty(value.shape, value.dtype)  # gloo reduces in place: the caller's value stays as it is

        def copy() -> None:
            result[...] = value
        if probe is not None and key is not None:  # said first: gloo's header waits can not be cut short
            probe.groups.probe(probe.step, f"{probe.where}\n{probe.what}".encode())
        try:
            shapes = self._announce(torch, _REDUCE, what, dict.fromkeys(peers, value), value.dtype,
                                    op, peers, meanwhile=copy if key != PAIR_KEY else None)
        except CollectiveError:
            # a member waiting in a bucket (which this member has no group for yet) released these
            # headers with empty ones: release it in turn, and name both
            others = {r: said for r, said in self._others(probe).items() if said[0].startswith("B ")} \
                if probe is not None else {}
            if not others:
                raise
            self._release(probe, [], others)
            raise self._mismatch(probe, others) from None
        bad = sorted(d for d, shape in shapes.items() if shape != value.shape)
        if bad:
            raise self._fail(CollectiveError(f"{op}: device {self.device} reduces a value of shape {list(value.shape)}, "
                                             f"device(s) {bad} of shape(s) {[list(shapes[d]) for d in bad]}",
                                             devices=bad))
        # every member agreed on this key: each makes its group now, at the same call
        bucket = groups.make_bucket_group(key) if key is not None else None  # never None for PAIR_KEY
        if bucket is not None and probe is not None:
            probe = _Probe(probe.groups, probe.step, probe.what, f"B {' '.join(map(str, key))}")
        if bucket is not None:
            return self._reduce_in(groups, key, bucket, group, value, reducer, what, options, op, peers, direct, probe)
        with _GlooErrors(self, op, peers):
            groups.data.allreduce([torch.from_numpy(result.reshape(-1))], options).wait()
        return result

    def _reduce_in(self, groups: GlooGroups, key: tuple[str, str, int], bucket: Any, group: tuple[int, ...],
                   value: np.ndarray, reducer: str, what: str, options: Any, op: str, peers: tuple[int, ...],
                   direct: bool, probe: _Probe | None) -> np.ndarray:
        """The reduction in `key`'s group `bucket`: a pair exchange (no probe: _reduce_in_pair) or a
        bucket's all_reduce."""
        if key == PAIR_KEY:
            return self._reduce_in_pair(self._pair_call(groups, group, value, reducer, what, op, peers, direct),
                                        bucket, value)
        call = self._bucket_call(groups, key, group, value, reducer, what, options, op, peers, direct)
        return self._reduce_in_bucket(call, bucket, value, probe)

    def _pair_call(self, groups: GlooGroups, group: tuple[int, ...], value: np.ndarray, reducer: str, what: str,
                   op: str, peers: tuple[int, ...], direct: bool) -> _PairCall:
        """The _PairCall of this reduction (made at its first call), kept for reduce's next ones
        when `direct`."""
        import torch

        at = (group, value.dtype, value.shape, reducer, op)
        call = self._calls.get(at)
        if call is None:
            key = ("pair", value.dtype.str, trailer.bucket(value.size))  # results of similar sizes share blocks
            pool = self._pools.get(key)
            if pool is None:
                pool = self._pools[key] = BlockPool(key[2], value.dtype, torch.from_numpy)
            first = self._ranks[group[0]] == self.rank  # two processes: this one holds the group's first device
            header, got = (Block(_HEADER, np.dtype(np.int64), torch.from_numpy) for _ in range(2))
            header.array[:] = self._header(np.array((0, _digest(op), _digest(what), _PAIR, _digest(value.dtype.str)),
                                                    np.int64), value)
            call = self._calls[at] = _PairCall(
                groups, PAIR_KEY, value.shape, value.dtype, op, peers, self._ranks[peers[0]], header, got, pool,
                value.size, value.nbytes, reducer_ufunc(reducer, value.dtype), first, PolledWait(self._poll_window))
        if direct:
            self._direct[at] = call
        return call

    def _reduce_in_pair(self, call: _PairCall, group: Any, value: np.ndarray) -> np.ndarray:
        """The reduction of `value` with the other process's: each sends the other its value (in
        the pair group `group`, tagged by its size) and, at the same time, the call's header (on
        the control group, as every exchange's: _announce), receives the other's value into a
        result block and folds its own into it in group order (so both get the same bits).
        Nothing is copied (a read-only or strided operand excepted), and no round trip comes
        before the value. A header that differs from this call's is a CollectiveError on both,
        never a result: whichever exchange the other reached, it learns of this one from the
        header and completes this value's messages (_release_pair), as this one does for the
        other's value when that is a pair exchange's of another size. Its waits are not probed:
        a gloo send or receive waited for with a timeout fails its whole group."""
        import torch

        if not (value.flags.c_contiguous and value.flags.writeable):  # torch wants a writeable buffer
            value = np.array(value, order="C")
        nbytes, peer, device = call.nbytes, call.rank, call.peers[0]
        header, got = call.header, call.got
        header.array[0] = self._seq
        result = call.results.take().array[:call.count].reshape(call.shape)
        tag = _pair_tag(nbytes)
        control = call.groups.control
        waits = call.waits
        with _GlooErrors(self, call.op, call.peers):
            posted = time.perf_counter()
            heard = (control.recv([got.tensor], peer, self._tag(device, self.device, 0)),
                     control.send([header.tensor], peer, self._tag(self.device, device, 0)))
            works = (group.recv([torch.from_numpy(result.reshape(-1).view(np.uint8))], peer, tag),
                     group.send([torch.from_numpy(value.reshape(-1).view(np.uint8))], peer, tag))
            waits.poll((*heard, *works), posted)  # while its calls end within the window (polling.py)
            for work in heard:
                work.wait()
            if got.raw != header.raw:
                theirs = got.array
                if theirs[3] == _PAIR and theirs[4] != nbytes:  # its value waits for messages of its size
                    self._release_pair(int(theirs[4]), device)
                for work in works:  # completed by the other's value or by its release of this one
                    work.wait()
                raise self._header_mismatch(call.op, call.dtype, device, theirs)
            for work in works:
                work.wait()
            waits.learn(posted, time.perf_counter())
        if call.first:  # elementwise, so folding into the received value reads each element before writing it
            call.ufunc(value, result, out=result)
        else:
            call.ufunc(result, value, out=result)
        return result

    def _header_mismatch(self, op: str, dtype: np.dtype, device: int, header: np.ndarray) -> CollectiveError:
        """The error (recorded: _fail) when `device`'s header, `header`, is not of this device's
        call, instruction, group, kind and type (_announce, _reduce_in_pair)."""
        at = f"call {int(header[0])}" if header[0] != self._seq else "the same call"
        return self._fail(CollectiveError(
            f"mismatched collectives at call {self._seq}: device {self.device} runs {op} on {dtype} values; "
            f"device {device}, at {at}, runs another instruction, group or value type", devices=[device]))

    def _release_pair(self, nbytes: int, device: int) -> None:
        """Complete the messages of the pair exchange of a value of `nbytes` bytes that `device`
        waits in, which this device's exchange does not match: zeros each way, never read. Best
        effort: the mismatch is the error to report."""
        import torch

        group = self._process_groups().bucket_group(PAIR_KEY)
        if group is None:
            return
        rank, tag = self._ranks[device], _pair_tag(nbytes)
        with contextlib.suppress(Exception):
            for work in (group.send([torch.zeros(nbytes, dtype=torch.uint8)], rank, tag),
                         group.recv([torch.zeros(nbytes, dtype=torch.uint8)], rank, tag)):
                work.wait()

    def _bucket_call(self, groups: GlooGroups, key: tuple[str, str, int], group: tuple[int, ...],
                     value: np.ndarray, reducer: str, what: str, options: Any, op: str, peers: tuple[int, ...],
                     direct: bool) -> _BucketCall:
        """The _BucketCall of this reduction (made at its first call), kept for reduce's next ones
        when `direct`."""
        import torch

        at = (group, value.dtype, value.shape, reducer, op)
        call = self._calls.get(at)
        if call is None:
            pool = self._pools.get(key)
            if pool is None:
                pool = self._pools[key] = BlockPool(key[2] + trailer.SLOTS, value.dtype, torch.from_numpy)
            call = self._calls[at] = _BucketCall(
                groups, key, key[2], value.shape, reducer, options, op, peers,
                _digest(f"{what} {value.dtype.str} {value.shape}"), f"{what} {value.dtype}{list(value.shape)}",
                f"B {' '.join(map(str, key))}", pool, math.prod(value.shape),
                trailer.codec(reducer, value.dtype, len(peers) + 1), PolledWait(self._poll_window))
        if direct:
            self._direct[at] = call
        return call

    def _reduce_again(self, call: _BucketCall | _PairCall, bucket: Any, value: np.ndarray) -> np.ndarray:
        """A reduction that went through `call`'s group before, again: what _reduce_over_processes
        does for it, without the checks whose answers are fixed by the call's key."""
        self._seq += 1
        if self._failure is not None:
            raise CollectiveError(str(self._failure), devices=self._failure.devices, origin=self._failure.origin)
        groups = call.groups
        groups.steps += 1
        if type(call) is _PairCall:
            return self._reduce_in_pair(call, bucket, value)
        return self._reduce_in_bucket(call, bucket, value, _Probe(groups, groups.steps,
                                                                  f"call {self._seq}: {call.said}", call.where))

    def _reduce_in_bucket(self, call: _BucketCall, bucket: Any, value: np.ndarray, probe: _Probe | None) -> np.ndarray:
        """gloo's all_reduce of `value` padded to the bucket's size plus the trailer, in the bucket's
        own group `bucket` (so no member's buffer can differ in size), in one of the bucket's buffers
        (blocks.py), a view of which is the result; the trailer then says whether every member
        reduced this call (trailer.py), else a CollectiveError on every member."""
        size, count, op = call.size, call.count, call.op
        block = call.pool.take()
        buffer = block.array
        np.copyto(buffer[:count].reshape(call.shape), value)
        if count < size:
            buffer[count:size] = 0
        digest = _mix(call.base, self._seq)  # the same on every member
        at = size * buffer.itemsize
        block.raw[at:] = call.trailer.encode(digest)
        peers = call.peers
        waits = call.waits
        with _GlooErrors(self, op, peers):
            posted = time.perf_counter()
            works = (bucket.allreduce([block.tensor], call.options),)
            waits.poll(works, posted)  # while its calls end within the window (polling.py)
            self._wait(works, probe)
            waits.learn(posted, time.perf_counter())
        if not call.trailer.agrees(block.raw[at:], digest):
            if probe is not None:  # a member that waits elsewhere may have released this call: release it in turn
                others = {r: said for r, said in self._others(probe).items()
                          if said[0].startswith("B ") and said[0] != probe.where}
                if others:
                    self._release(probe, [], others)
                    raise self._mismatch(probe, others)
            raise self._fail(CollectiveError(
                f"mismatched collectives at call {self._seq}: device {self.device} runs {op} on {value.dtype} values; "
                f"device(s) {list(peers)} reduced a value of the same type and size in another instruction, group or "
                f"call", devices=list(peers)))
        return buffer[:count].reshape(call.shape)

    def _wait(self, works: Sequence[Any], probe: _Probe | None) -> None:
        """Wait for `works` (collectives: gloo's send and recv waits can not be cut short, they fail
        at their timeout). With `probe`, past PROBE_AFTER_S, say in the store what this member
        waits in (_Probe), and fail when another member says it waits in something else at the
        same step: members whose buckets differ never meet in a group, and one may exchange
        headers while the other waits in a bucket. Before failing, each releases the others'
        waits (_release), so that no gloo call stays pending (a process exiting with one aborts)."""
        if probe is None:
            for work in works:
                work.wait()
            return
        timeout = _PROBE_AFTER
        for work in works:
            while True:
                try:
                    work.wait(timeout)
                    break
                except RuntimeError:
                    if work.is_completed():  # gloo's own error: a closed connection, its timeout
                        raise
                timeout = _PROBE_EVERY
                others = self._others(probe)
                if others:
                    self._release(probe, works, others)
                    raise self._mismatch(probe, others)

    def _others(self, probe: _Probe) -> dict[int, tuple[str, str]]:
        """Say where this member waits; return (where, what) of the members that said they wait
        at the same step in another collective."""
        said = probe.groups.probe(probe.step, f"{probe.where}\n{probe.what}".encode())
        parts = {r: text.decode(errors="replace").partition("\n") for r, text in said.items()}
        return {r: (where, what) for r, (where, _, what) in parts.items() if what != probe.what}

    def _mismatch(self, probe: _Probe, others: dict[int, tuple[str, str]]) -> CollectiveError:
        devices = [d for d, r in enumerate(self._ranks) if r in others]
        return self._fail(CollectiveError(
            f"mismatched collectives: device {self.device} waits in {probe.what}; "
            + "; ".join(f"device {d} in {others[self._ranks[d]][1]}" for d in devices), devices=devices))

    def _release(self, probe: _Probe, works: Sequence[Any], others: dict[int, tuple[str, str]]) -> None:
        """Complete the gloo calls the members of `others` wait in (a bucket's all_reduce: one of
        the same size here; a header exchange: a header each way with its call's tags), so that
        theirs and, as they do the same, this member's own `works` end; waits at most
        RELEASE_WAIT_S. Values so exchanged are never read."""
        import torch

        groups = probe.groups
        posted = []
        with contextlib.suppress(Exception):  # best effort: the mismatch is the error to report
            for rank, (where, _) in others.items():
                kind, *fields = where.split()
                if kind == "B" and where != probe.where:
                    group = groups.bucket_group((fields[0], fields[1], int(fields[2])))
                    if group is not None:
                        posted.append(group.allreduce([torch.zeros(int(fields[2]) + trailer.SLOTS,
                                                                   dtype=_torch_dtype(torch, fields[0]))]))
                elif kind == "H":
                    seq, device = int(fields[0]), int(fields[1])
                    posted.append(groups.control.send([torch.zeros(_HEADER, dtype=torch.int64)], rank,
                                                      self._tag(self.device, device, 0, seq)))
                    posted.append(groups.control.recv([torch.zeros(_HEADER, dtype=torch.int64)], rank,
                                                      self._tag(device, self.device, 0, seq)))
        deadline = datetime.timedelta(seconds=RELEASE_WAIT_S)
        for work in [*works, *posted]:
            with contextlib.suppress(Exception):
                work.wait(deadline)
            if not work.is_completed():  # gloo still holds it: exit must not destroy these groups
                groups.fail()

    def abort(self, error: BaseException) -> None:
        """This device failed. This process's other devices learn it at once (`local`); the
        other processes when this one's connections close (it exits) or at the collective
        timeout: gloo has no way to cancel their waits."""
        if self.local is not None:
            self.local.abort(self.device, error)
        if self._failure is None:
            self._failure = CollectiveError(f"device {self.device} failed: {type(error).__name__}: {error}",
                                            devices=[self.device], origin=self.device)

    def _local_devices(self) -> list[int]:
        return [d for d, r in enumerate(self._ranks) if r == self.rank]

    def _local(self) -> Any:
        if self.local is None:
            raise CollectiveError(f"device {self.device} shares process {self.rank} with devices "
                                  f"{self._local_devices()} but has no local exchange (ProcessWorld.new_run)")
        return self.local

    def _tag(self, source: int, target: int, phase: int, seq: int | None = None) -> int:
        """The gloo tag of call `_seq`'s message from device `source` to `target` (0: header,
        1: payload): distinct for every pair, so several devices of one process never take each
        other's messages."""
        w = self.world_size
        return (((self._seq if seq is None else seq) * w + source) * w + target) * 2 % (1 << 30) + phase

    # -- the exchange ------------------------------------------------------------------------------
    def _exchange(self, kind: int, what: str, sends: dict[int, np.ndarray], like: np.ndarray, op: str,
                  receive_from: tuple[int, ...],
                  place: Callable[[dict[int, tuple[int, ...]]], dict[int, np.ndarray] | None] | None = None,
                  known: dict[int, tuple[int, ...]] | None = None) -> dict[int, np.ndarray]:
        """Send sends[d] to each device d, and return the values of `receive_from`: first the
        headers, whose call, instruction, group, kind and dtype must equal this device's (shapes
        may differ: uneven chunks), then the bytes, received into arrays of the headers' shapes.
        `like`: an array of the dtype every value has (what this device would send); `place`:
        given the announced shapes, the (contiguous) arrays to receive into, else new ones.
        `known`: the shapes of the values from `receive_from`, already checked by an exchange of
        the same call (Communicator.all_gather's `shapes`): no headers, the bytes at once (one
        round trip less: the headers are most of a small all-reduce's waiting)."""
        import torch

        if self._failure is not None:
            raise CollectiveError(str(self._failure), devices=self._failure.devices, origin=self._failure.origin)
        if not sends and not receive_from:
            return {}
        dtype = np.asarray(like).dtype
        outs: dict[int, np.ndarray] = {}
        ready: dict[int, np.ndarray] = {}  # id(value) -> its sendable form (a gather sends one value to all)
        for d, value in sends.items():
            out = ready.get(id(value))
            if out is None:
                out = np.asarray(value)
                if not (out.flags.c_contiguous and out.flags.writeable):  # torch wants a writeable buffer
                    out = out.copy(order="C")  # (not np.ascontiguousarray: it makes a scalar 1-d)
                if out.ndim > _MAX_DIMS:
                    raise CollectiveError(f"{op}: a value of {out.ndim} dimensions (at most {_MAX_DIMS} cross "
                                          "processes)")
                if out.dtype != dtype:
                    raise CollectiveError(f"{op}: pieces of types {dtype} and {out.dtype}")
                ready[id(value)] = out
            outs[d] = out
        if known is not None:
            received = (place(known) if place is not None else None) or {d: np.empty(known[d], dtype)
                                                                          for d in receive_from}
            self._transfer(torch, {d: v.reshape(-1).view(np.uint8) for d, v in outs.items()},
                           {d: b.reshape(-1).view(np.uint8) for d, b in received.items()}, 1, op)
            return received
        shapes = self._announce(torch, kind, what, outs, dtype, op, receive_from)
        received = (place(shapes) if place is not None else None) or {d: np.empty(shapes[d], dtype)
                                                                       for d in receive_from}
        self._transfer(torch, {d: v.reshape(-1).view(np.uint8) for d, v in outs.items()},
                       {d: b.reshape(-1).view(np.uint8) for d, b in received.items()}, 1, op)
        return received

    def _announce(self, torch: Any, kind: int, what: str, outs: dict[int, np.ndarray], dtype: np.dtype, op: str,
                  receive_from: tuple[int, ...], meanwhile: Callable[[], None] | None = None
                  ) -> dict[int, tuple[int, ...]]:
        """Send each device of `outs` the header of its value; return the shapes the headers of
        `receive_from` announce, after checking that their call, instruction, group, kind and dtype
        are this device's. `meanwhile` runs while the headers travel."""
        mine = np.array((self._seq, _digest(op), _digest(what), kind, _digest(dtype.str)), np.int64)
        sent_headers = {d: self._header(mine, v) for d, v in outs.items()}
        headers = {d: np.empty(_HEADER, np.int64) for d in receive_from}
        self._transfer(torch, sent_headers, headers, 0, op, meanwhile)
        shapes = {}
        for d, h in headers.items():
            if not np.array_equal(h[[0, 1, 2, 3, 5]], mine):
                if h[3] == _PAIR:  # its value waits for this device beside its header
                    self._release_pair(int(h[4]), d)
                raise self._header_mismatch(op, dtype, d, h)
            shape = tuple(int(n) for n in h[7:7 + int(h[6])])
            if not 0 <= h[6] <= _MAX_DIMS or int(np.prod(shape, dtype=np.int64)) * dtype.itemsize != h[4]:
                raise self._fail(CollectiveError(f"{op}: device {d} announced {int(h[4])} bytes of shape "
                                                 f"{list(shape)}", devices=[d]))
            shapes[d] = shape
        return shapes

    @staticmethod
    def _header(mine: np.ndarray, value: np.ndarray) -> np.ndarray:
        header = np.zeros(_HEADER, np.int64)
        header[[0, 1, 2, 3, 5]] = mine
        header[4], header[6] = value.nbytes, value.ndim
        header[7:7 + value.ndim] = value.shape
        return header

    def _transfer(self, torch: Any, outs: dict[int, np.ndarray], into: dict[int, np.ndarray],
                  phase: int, op: str, meanwhile: Callable[[], None] | None = None) -> None:
        """Point-to-point: outs[d] to every device d, each `into[d]` from device d (all posted
        before any wait, so no order of peers can deadlock); `meanwhile` runs between posting and
        waiting. gloo's all_gather was 5-15x slower than this on localhost for 16 MB."""
        groups, ranks = self._process_groups(), self._ranks
        group = groups.control if phase == 0 else groups.data
        with _GlooErrors(self, op, sorted(set(outs) | set(into))):
            works = [group.send([torch.from_numpy(out)], ranks[d], self._tag(self.device, d, phase))
                     for d, out in outs.items()]
            works += [group.recv([torch.from_numpy(buf)], ranks[d], self._tag(d, self.device, phase))
                      for d, buf in into.items()]
            if meanwhile is not None:
                meanwhile()
            for w in works:
                w.wait()

    def _fail(self, error: CollectiveError) -> CollectiveError:
        if self._failure is None:
            self._failure = error
        return error


class _GlooErrors:
    """Around a device's gloo calls: gloo's errors (a closed connection, a timeout) as a
    CollectiveError naming the peers, after which the world's exchanges fail. Inside, the groups
    count a pending call (GlooGroups.in_use: exit closes only idle groups that never failed). A
    class rather than a generator context manager: every all-reduce enters one, and between two
    gloo calls (cold caches) the generator and its frames cost tens of microseconds."""

    __slots__ = ("comm", "op", "peers", "in_use")

    def __init__(self, comm: GlooCommunicator, op: str, peers: Sequence[int]) -> None:
        self.comm, self.op, self.peers = comm, op, peers
        self.in_use = comm._process_groups().in_use()

    def __enter__(self) -> None:
        self.in_use.__enter__()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: Any) -> None:
        self.in_use.__exit__(kind, error, tb)
        if error is None or isinstance(error, CollectiveError) or not isinstance(error, Exception):
            return  # a KeyboardInterrupt and the like propagate as they are (in_use marked the groups failed)
        # gloo raises RuntimeError and DistBackendError
        comm, peers = self.comm, sorted(self.peers)
        text = str(error).splitlines()[0] if str(error) else type(error).__name__
        cls = CollectiveTimeout if "timed out" in text.lower() or "timeout" in text.lower() else CollectiveError
        ranks = comm._ranks
        raise comm._fail(cls(f"{self.op} (call {comm._seq}) over torch.distributed failed: a peer process "
                             f"(device(s) {peers} on process(es) {sorted({ranks[d] for d in peers})}) died, "
                             f"hung past {comm.timeout_s:g} s (NEURON_RT_EXEC_TIMEOUT) or left: {text}",
                             devices=peers)) from error


def run_on_process_group(executable: Any, inputs: Sequence[np.ndarray], *, num_replicas: int | None = None,
                         num_partitions: int = 1, communicator: GlooCommunicator | None = None) -> list[np.ndarray]:
    """This process's device's outputs of `executable` (emulator.executor.Executable), whose
    collectives meet those of the other ranks. Device = rank; the world is num_replicas x
    num_partitions devices (default: one replica per rank)."""
    comm = communicator if communicator is not None else GlooCommunicator()
    replicas = comm.world_size // num_partitions if num_replicas is None else num_replicas
    if replicas * num_partitions != comm.world_size:
        raise CollectiveError(f"{replicas} replicas x {num_partitions} partitions need {replicas * num_partitions} "
                              f"processes; torch.distributed has {comm.world_size}")
    ctx = DeviceContext(comm.device // num_partitions, comm.device % num_partitions, replicas, num_partitions, comm)
    try:
        with running_as(ctx):
            return executable.run(list(inputs))
    except BaseException as e:
        comm.abort(e)
        raise


class ProcessWorld:
    """This process's devices of a program whose other devices run in other processes: one
    GlooCommunicator per local device (kept across runs: calls are numbered in program order),
    and per run a ThreadCommunicator over the logical ids for the exchanges between local
    devices. What emulator.collectives.run_devices asks of its communicator: endpoint(d),
    abort(d, error), origin."""

    def __init__(self, device_ranks: Sequence[int], rank: int, group: Any, timeout_s: float | None = None) -> None:
        self.timeout_s = default_timeout() if timeout_s is None else float(timeout_s)
        self.world_size = len(device_ranks)
        self.devices = [d for d, r in enumerate(device_ranks) if r == rank]
        self._endpoints = {d: GlooCommunicator(self.timeout_s, group=group, device_ranks=device_ranks, rank=rank,
                                               device=d) for d in self.devices}
        self._local: ThreadCommunicator | None = None

    def new_run(self) -> ProcessWorld:
        """A fresh local exchange for the next run (a failed run's state stays with it)."""
        self._local = ThreadCommunicator(self.world_size, self.timeout_s)
        for endpoint in self._endpoints.values():
            endpoint.local = self._local
        return self

    def endpoint(self, device: int) -> GlooCommunicator:
        return self._endpoints[device]

    def abort(self, device: int, error: BaseException) -> None:
        self._endpoints[device].abort(error)

    @property
    def origin(self) -> tuple[int, BaseException] | None:
        return self._local.origin if self._local is not None else None
