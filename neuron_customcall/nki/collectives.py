"""``nki.collectives`` (beta 2): exchanges between the NeuronCores a program runs on.

Each call traces to one ``collective`` kernel-IR instruction per (source, destination) pair
(emulator/kernel_exec/collective.py runs it through the core's Communicator), so a kernel in a
program run on several emulated cores (``emulator.collectives.run_devices``, the neuron PJRT
device with ``NEURON_RT_NUM_CORES``) exchanges data with the same kernel on the other cores. A
rank is the flat device id of the core (replica * num_partitions + partition); a kernel run on
its own (NumPy arrays in) is rank 0 of one, where a group of ``[[0]]`` works and any other rank
fails at run time naming the kernel.

Shapes, memories and ``collective_dim`` follow the stubs' docstrings and are checked while
tracing, with the group size taken from the ``ReplicaGroup`` (every sub-group the same size).
The variable-size forms (``*_v``) read their counts from the metadata tensor at run time; the
hardware-specific limits their docstrings list (LNC=2 only, four ranks per group) are not
imposed, ``all_gather_v``'s ``has_rdispls=True`` is refused by name as the reference does.
"""

from __future__ import annotations

from typing import Any, Sequence

from emulator import machine
from emulator.kernel_ir import Affine, affine_to_json

from .indexing import Idx
from .registers import VirtualRegister
from .lang.constants import NKIObject
from .lang.operands import alu_op_name
from .tile import Tile
from .tracer import current
from .unsupported import refuse

_REDUCERS = ("add", "minimum", "maximum")


class ReplicaGroup(NKIObject):
    """Groups of ranks taking part in a collective: ``ReplicaGroup([[0, 1], [2, 3]])`` (or
    ``ReplicaGroup(replica_groups=...)``; one flat list is one group); sub-groups must not
    overlap."""

    def __init__(self, *groups: Any, **kwargs: Any):
        super().__init__(**kwargs)
        found = list(groups) + [v for v in kwargs.values() if isinstance(v, (list, tuple))]
        if len(found) != 1:
            raise TypeError("ReplicaGroup takes one list of rank groups, e.g. ReplicaGroup([[0]])")
        g = found[0]
        self.groups = tuple(tuple(int(r) for r in sub) for sub in (
            [g] if g and all(isinstance(r, int) for r in g) else g))
        ranks = [r for sub in self.groups for r in sub]
        if len(ranks) != len(set(ranks)):
            raise ValueError(f"ReplicaGroup {self.groups}: sub-groups overlap")
        if any(r < 0 for r in ranks):
            raise ValueError(f"ReplicaGroup {self.groups}: ranks are non-negative")

    def __repr__(self) -> str:
        return f"ReplicaGroup({[list(g) for g in self.groups]})"


def _one_rank_per_core(api: str) -> None:
    if current().lnc is not None:
        refuse(f"nki.collectives.{api}", "inside an LNC=2 launch (ranks of the two cores of a "
               "logical NeuronCore)")


def _group_attrs(api: str, group: Any) -> dict:
    """The IR attributes of a replica group: flat ranks and the common group size."""
    _one_rank_per_core(api)
    if not isinstance(group, ReplicaGroup):
        raise TypeError(f"nki.collectives.{api}: replica_group must be a ReplicaGroup")
    sizes = {len(g) for g in group.groups}
    if not group.groups or 0 in sizes:
        raise current().error("replica group", f"nki.collectives.{api}: {group!r} has an empty "
                              "group")
    if len(sizes) > 1:
        refuse(f"nki.collectives.{api}", f"replica groups of different sizes {group!r}")
    return {"groups": [r for g in group.groups for r in g], "group_size": sizes.pop()}


def _op(api: str, op) -> str:
    name = alu_op_name(op)
    if name not in _REDUCERS:
        raise current().error("collective operator", f"nki.collectives.{api}: op is nl.add, "
                              f"nl.minimum or nl.maximum, got {op!r}")
    return name


def _pairs(api: str, srcs: Sequence[Tile], dsts: Sequence[Tile]) -> list[tuple[Tile, Tile]]:
    srcs, dsts = list(srcs), list(dsts)
    if len(srcs) != len(dsts) or not srcs:
        raise current().error("collective operands", f"nki.collectives.{api}: {len(srcs)} "
                              f"sources and {len(dsts)} destinations")
    for t in srcs + dsts:
        if not isinstance(t, Tile):
            raise current().error("collective operands", f"nki.collectives.{api}: sources and "
                                  f"destinations are tensors, got {type(t).__name__}")
        if t.buffer == machine.PSUM:
            raise current().error("collective memory", f"nki.collectives.{api}: {t.name!r} is "
                                  "in PSUM; collectives move HBM or SBUF tensors")
    memories = {t.buffer in (machine.HBM, machine.SHARED_HBM) for t in srcs + dsts}
    if len(memories) > 1:
        raise current().error("collective memory", f"nki.collectives.{api}: tensors are all on "
                              "HBM or all on SBUF, not mixed")
    if len(srcs) > 1 and memories != {True}:
        raise current().error("collective memory", f"nki.collectives.{api}: several tensors "
                              "at once (coalesced) only on HBM")
    for s, d in zip(srcs, dsts):
        if s.dtype_name != d.dtype_name:
            raise current().error("collective operands", f"nki.collectives.{api}: source and "
                                  f"destination have one dtype, got {s!r} -> {d!r}")
    return list(zip(srcs, dsts))


def _expect(api: str, s: Tile, d: Tile, shape: tuple[int, ...], why: str) -> None:
    if tuple(d.shape) != tuple(shape):
        raise current().error("collective shape", f"nki.collectives.{api}: destination "
                              f"{list(d.shape)} for source {list(s.shape)}: {why} gives "
                              f"{list(shape)}")


def _collective_dim(api: str, srcs, collective_dim: int, sbuf_dims: tuple[int, ...]) -> int:
    on_hbm = all(isinstance(s, Tile) and not s.on_chip for s in srcs)
    allowed = (0,) if on_hbm else sbuf_dims
    if collective_dim not in allowed:
        raise current().error("collective_dim", f"nki.collectives.{api}: collective_dim "
                              f"{collective_dim!r} (supported: {allowed})")
    return int(collective_dim)


def _scaled(shape, dim: int, factor: int, divide: bool = False) -> tuple[int, ...]:
    out = list(shape)
    out[dim] = out[dim] // factor if divide else out[dim] * factor
    return tuple(out)


def all_reduce(srcs, dsts, replica_group, op, priority=None, name=None) -> None:
    """Every rank of the group gets the reduction (``nl.add``, ``nl.minimum`` or
    ``nl.maximum``) of the group's sources, folded in group order."""
    attrs = {"kind": "all_reduce", "op": _op("all_reduce", op),
             **_group_attrs("all_reduce", replica_group)}
    for s, d in _pairs("all_reduce", srcs, dsts):
        _expect("all_reduce", s, d, s.shape, "a reduction")
        current().emit("collective", d, s, **attrs)


def all_gather(srcs, dsts, replica_group, collective_dim, priority=None, name=None) -> None:
    """Every rank gets the group's sources concatenated along ``collective_dim`` in group
    order."""
    dim = _collective_dim("all_gather", srcs, collective_dim, (0, 1))
    attrs = {"kind": "all_gather", "dim": dim, **_group_attrs("all_gather", replica_group)}
    for s, d in _pairs("all_gather", srcs, dsts):
        _expect("all_gather", s, d, _scaled(s.shape, dim, attrs["group_size"]),
                f"concatenating {attrs['group_size']} ranks along dimension {dim}")
        current().emit("collective", d, s, **attrs)


def reduce_scatter(srcs, dsts, replica_group, collective_dim, op, priority=None,
                   name=None) -> None:
    """The reduction of the group's sources, split along ``collective_dim``: rank ``i`` of the
    group gets part ``i``."""
    dim = _collective_dim("reduce_scatter", srcs, collective_dim, (0,))
    attrs = {"kind": "reduce_scatter", "dim": dim, "op": _op("reduce_scatter", op),
             **_group_attrs("reduce_scatter", replica_group)}
    n = attrs["group_size"]
    for s, d in _pairs("reduce_scatter", srcs, dsts):
        if s.shape[dim] % n:
            raise current().error("collective shape", f"nki.collectives.reduce_scatter: "
                                  f"dimension {dim} of {list(s.shape)} does not split in {n}")
        _expect("reduce_scatter", s, d, _scaled(s.shape, dim, n, divide=True),
                f"scattering over {n} ranks along dimension {dim}")
        current().emit("collective", d, s, **attrs)


def all_to_all(srcs, dsts, replica_group, collective_dim, priority=None, name=None) -> None:
    """Part ``j`` (along ``collective_dim``) of every rank's source goes to the group's rank
    ``j``; each rank concatenates what it receives in group order. HBM only."""
    dim = _collective_dim("all_to_all", srcs, collective_dim, ())
    attrs = {"kind": "all_to_all", "dim": dim, **_group_attrs("all_to_all", replica_group)}
    n = attrs["group_size"]
    for s, d in _pairs("all_to_all", srcs, dsts):
        if s.shape[dim] % n:
            raise current().error("collective shape", f"nki.collectives.all_to_all: dimension "
                                  f"{dim} of {list(s.shape)} does not split in {n}")
        _expect("all_to_all", s, d, s.shape, "an exchange of equal parts")
        current().emit("collective", d, s, **attrs)


def _one_hbm_each(api: str, srcs, dsts, same_shape: bool = True) -> tuple[Tile, Tile]:
    srcs, dsts = list(srcs), list(dsts)
    if len(srcs) != 1 or len(dsts) != 1 or any(
            not isinstance(t, Tile) or t.on_chip for t in srcs + dsts):
        raise current().error("collective operands", f"nki.collectives.{api}: one HBM source "
                              "and one HBM destination")
    ((s, d),) = _pairs(api, srcs, dsts)
    if same_shape:
        _expect(api, s, d, s.shape, "a permutation")
    return s, d


def collective_permute(srcs, dsts, source_target_pairs, priority=None, name=None) -> None:
    """Each ``(source, target)`` pair sends the source rank's tensor to the target rank's
    destination; a rank no pair targets keeps its destination. HBM only, one tensor."""
    pairs = [tuple(int(v) for v in p) for p in source_target_pairs]
    if any(len(p) != 2 or min(p) < 0 for p in pairs):
        raise current().error("source_target_pairs", "nki.collectives.collective_permute: "
                              f"pairs of two ranks, got {source_target_pairs!r}")
    if len({s for s, _ in pairs}) != len(pairs) or len({t for _, t in pairs}) != len(pairs):
        raise current().error("source_target_pairs", "nki.collectives.collective_permute: "
                              f"a rank is a source or a target once, got {pairs}")
    _one_rank_per_core("collective_permute")
    s, d = _one_hbm_each("collective_permute", srcs, dsts)
    current().emit("collective", d, s, kind="permute", pairs=[r for p in pairs for r in p])


def _channels(api: str, channel_ids, *lists) -> list[tuple]:
    """Per channel, the one tensor of each ``*_by_channel`` list."""
    ids = list(channel_ids)
    if ids != list(range(len(ids))) or not ids:
        raise current().error("channel_ids", f"nki.collectives.{api}: consecutive integers "
                              f"from 0, got {channel_ids!r}")
    out = []
    for lst in lists:
        lst = list(lst)
        if len(lst) != len(ids) or any(len(list(inner)) != 1 for inner in lst):
            raise current().error("collective operands", f"nki.collectives.{api}: one list of "
                                  f"exactly one tensor per channel ({len(ids)} channels)")
        out.append([list(inner)[0] for inner in lst])
    return list(zip(*out))


def collective_permute_implicit(srcs_by_channel, dsts_by_channel, replica_group,
                                channel_ids=(0,), priority=None, name=None) -> None:
    """A ring over each group (in its order): every rank sends each channel's source to its
    successor and receives its predecessor's into the destination."""
    attrs = {"kind": "ring", **_group_attrs("collective_permute_implicit", replica_group)}
    for s, d in _channels("collective_permute_implicit", channel_ids, srcs_by_channel,
                          dsts_by_channel):
        ((s, d),) = _pairs("collective_permute_implicit", [s], [d])
        _expect("collective_permute_implicit", s, d, s.shape, "a ring step")
        current().emit("collective", d, s, **attrs)


def collective_permute_implicit_reduce(srcs0_by_channel, srcs1_by_channel, dsts_by_channel,
                                       replica_group, op, channel_ids=(0,), priority=None,
                                       name=None) -> None:
    """A ring step of ``op(srcs0, srcs1)``: each rank reduces its two sources, sends the result
    to its successor and receives its predecessor's into the destination."""
    api = "collective_permute_implicit_reduce"
    attrs = {"kind": "ring_reduce", "op": _op(api, op), **_group_attrs(api, replica_group)}
    for s0, s1, d in _channels(api, channel_ids, srcs0_by_channel, srcs1_by_channel,
                               dsts_by_channel):
        ((s0, d),) = _pairs(api, [s0], [d])
        ((s1, _),) = _pairs(api, [s1], [d])
        if tuple(s1.shape) != tuple(s0.shape):
            raise current().error("collective shape", f"nki.collectives.{api}: sources "
                                  f"{list(s0.shape)} and {list(s1.shape)} differ")
        _expect(api, s0, d, s0.shape, "a ring step")
        current().emit("collective", d, s0, s1, **attrs)


def _register(**attrs) -> VirtualRegister:
    tr = current()
    reg = VirtualRegister(Tile(tr, tr.declare((1, 1), "int32", machine.SBUF)))
    tr.emit("rank_id", reg.tile, **attrs)
    return reg


def collective_permute_implicit_current_processing_rank_id(iteration_id, replica_group,
                                                           channel_id=0, name=None):
    """A register holding the rank whose data this rank processes at ring step
    ``iteration_id`` (an int or a loop variable): its own at step 0, then its predecessors'."""
    api = "collective_permute_implicit_current_processing_rank_id"
    attrs = _group_attrs(api, replica_group)
    if isinstance(iteration_id, Idx):
        step = iteration_id.to_affine(2)
    elif isinstance(iteration_id, int) and not isinstance(iteration_id, bool):
        step = Affine(int(iteration_id), ())
    else:
        raise current().error("iteration_id", f"nki.collectives.{api}: an int or a loop "
                              f"variable, got {type(iteration_id).__name__}")
    return _register(step=affine_to_json(step), **attrs)


def rank_id(name=None) -> VirtualRegister:
    """A register holding this core's rank (its flat device id; 0 on its own). Like the
    reference's, it is a run-time value: store it into a tile (``nisa.register_store``) to use
    it as data."""
    return _register()


def _variable(api: str, srcs, dsts, replica_group, metadata_tensor, recv_counts_known: bool,
              has_rdispls: bool) -> None:
    """``all_gather_v`` / ``all_to_all_v``: one HBM source and destination (flat element
    buffers) and the uint32 metadata, (rows, ranks) on HBM or (1, rows, ranks) on SBUF with 3
    rows (4 with ``has_rdispls``); unless ``recv_counts_known``, row 2 receives the counts."""
    attrs = _group_attrs(api, replica_group)
    s, d = _one_hbm_each(api, srcs, dsts, same_shape=False)
    m = metadata_tensor
    rows, n = (4 if has_rdispls else 3), attrs["group_size"]
    if not isinstance(m, Tile) or m.dtype_name != "uint32" or m.buffer == machine.PSUM:
        raise current().error("metadata_tensor", f"nki.collectives.{api}: a uint32 tensor on "
                              f"HBM or SBUF, got {m!r}")
    want = (rows, n) if not m.on_chip else (1, rows, n)
    if tuple(m.shape) != want:
        raise current().error("metadata_tensor", f"nki.collectives.{api}: metadata of shape "
                              f"{list(want)} for {n} ranks (has_rdispls={has_rdispls}), got "
                              f"{list(m.shape)}")
    tr = current()
    tr.emit("collective", d, s, m, kind=api, rdispls=bool(has_rdispls), **attrs)
    if not recv_counts_known:
        row = m[2:3, :] if not m.on_chip else m[0:1, 2:3, :]
        tr.emit("collective", row, m, kind=f"recv_counts_{api}", **attrs)


def all_gather_v(srcs, dsts, replica_group, metadata_tensor, recv_counts_known=False,
                 has_rdispls=False, priority=None, name=None) -> None:
    """Each rank's chunk ``src[send_displ : send_displ + send_count]`` (column 0 of metadata
    rows 1 and 0) goes to every rank, where sender ``s``'s lands at slot ``s`` of ``dst`` (its
    elements split in equal slots, one per rank); the rest of each slot keeps its values."""
    if has_rdispls:
        refuse("nki.collectives.all_gather_v", "has_rdispls=True (the reference does not "
               "support it either)")
    _variable("all_gather_v", srcs, dsts, replica_group, metadata_tensor, recv_counts_known,
              False)


def all_to_all_v(srcs, dsts, replica_group, metadata_tensor, recv_counts_known=False,
                 has_rdispls=False, priority=None, name=None) -> None:
    """Rank ``i`` sends ``src[send_displs[j] : send_displs[j] + send_counts[j]]`` to group rank
    ``j``, which puts it at ``recv_displs[i]`` (row 3, with ``has_rdispls``) or at slot ``i`` of
    ``dst``'s equal slots; the counts are known only at run time."""
    _variable("all_to_all_v", srcs, dsts, replica_group, metadata_tensor, recv_counts_known,
              has_rdispls)


__all__ = ["ReplicaGroup", "all_reduce", "all_gather", "all_gather_v", "reduce_scatter",
           "all_to_all", "all_to_all_v", "collective_permute", "collective_permute_implicit",
           "collective_permute_implicit_reduce",
           "collective_permute_implicit_current_processing_rank_id", "rank_id"]
