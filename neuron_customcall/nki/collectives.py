"""``nki.collectives`` (beta 2) on one NeuronCore: replica groups of this core alone.

The emulator runs one NeuronCore (rank 0), so a collective over a group that is only this rank
moves each source into its destination unchanged: an all-reduce of one contribution, an
all-gather or reduce-scatter of one part, an all-to-all or a permute from rank 0 to rank 0 are
all ``dst = src`` (``nki.isa.dma_copy``: HBM or SBUF, as the reference allows, not mixed). Any
group with another rank, and the ring and variable-size forms whose meaning needs other ranks'
data, are refused by name (``UnsupportedAPIError``) until several cores are emulated (issue 18).
"""

from __future__ import annotations

from typing import Any, Sequence

from emulator import machine

from .isa.movement import dma_copy
from .lang.constants import NKIObject
from .lang.operands import alu_op_name
from .tile import Tile
from .tracer import current
from .unsupported import refuse, unsupported

_MULTI = "needs several NeuronCores; the emulator runs one (multi-core is issue 18)"


class ReplicaGroup(NKIObject):
    """Groups of ranks taking part in a collective: ``ReplicaGroup([[0]])`` (or
    ``ReplicaGroup(replica_groups=[[0]])``); sub-groups must not overlap."""

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

    def __repr__(self) -> str:
        return f"ReplicaGroup({[list(g) for g in self.groups]})"


def _one_core(api: str, group: Any) -> None:
    if not isinstance(group, ReplicaGroup):
        raise TypeError(f"nki.collectives.{api}: replica_group must be a ReplicaGroup")
    if group.groups != ((0,),):
        refuse(f"nki.collectives.{api}", f"the replica group {group!r} {_MULTI}")


def _pairs(api: str, srcs: Sequence[Tile], dsts: Sequence[Tile]) -> list[tuple[Tile, Tile]]:
    srcs, dsts = list(srcs), list(dsts)
    if len(srcs) != len(dsts) or not srcs:
        raise current().error("collective operands", f"nki.collectives.{api}: {len(srcs)} "
                              f"sources and {len(dsts)} destinations")
    memories = {t.buffer in (machine.HBM, machine.SHARED_HBM) for t in srcs + dsts
                if isinstance(t, Tile)}
    if len(memories) > 1:
        raise current().error("collective memory", f"nki.collectives.{api}: tensors are all on "
                              "HBM or all on SBUF, not mixed")
    if len(srcs) > 1 and memories != {True}:
        raise current().error("collective memory", f"nki.collectives.{api}: several tensors "
                              "at once (coalesced) only on HBM")
    for s, d in zip(srcs, dsts):
        if not isinstance(s, Tile) or not isinstance(d, Tile) or tuple(s.shape) != tuple(d.shape):
            raise current().error("collective operands", f"nki.collectives.{api}: on one rank "
                                  f"each destination has its source's shape, got {s!r} -> {d!r}")
    return list(zip(srcs, dsts))


def _copy_all(api: str, srcs, dsts) -> None:
    for s, d in _pairs(api, srcs, dsts):
        dma_copy(d, s, api=f"nki.collectives.{api}")


def all_reduce(srcs, dsts, replica_group, op, priority=None, name=None) -> None:
    """Reduce over the group's ranks (``nl.add``, ``nl.minimum`` or ``nl.maximum``)."""
    if alu_op_name(op) not in ("add", "minimum", "maximum"):
        raise current().error("collective operator", f"nki.collectives.all_reduce: op is "
                              f"nl.add, nl.minimum or nl.maximum, got {op!r}")
    _one_core("all_reduce", replica_group)
    _copy_all("all_reduce", srcs, dsts)


def _collective_dim(api: str, srcs, collective_dim: int) -> None:
    on_hbm = all(isinstance(s, Tile) and not s.on_chip for s in srcs)
    allowed = (0,) if on_hbm else (0, 1)
    if collective_dim not in allowed:
        raise current().error("collective_dim", f"nki.collectives.{api}: collective_dim "
                              f"{collective_dim!r} (supported: {allowed})")


def all_gather(srcs, dsts, replica_group, collective_dim, priority=None, name=None) -> None:
    """Concatenate the ranks' sources along ``collective_dim``: one rank's is the whole."""
    _collective_dim("all_gather", srcs, collective_dim)
    _one_core("all_gather", replica_group)
    _copy_all("all_gather", srcs, dsts)


def reduce_scatter(srcs, dsts, replica_group, collective_dim, op, priority=None,
                   name=None) -> None:
    """Reduce over the ranks, then give each its part along ``collective_dim``."""
    if alu_op_name(op) not in ("add", "minimum", "maximum"):
        raise current().error("collective operator", f"nki.collectives.reduce_scatter: op is "
                              f"nl.add, nl.minimum or nl.maximum, got {op!r}")
    _collective_dim("reduce_scatter", srcs, collective_dim)
    _one_core("reduce_scatter", replica_group)
    _copy_all("reduce_scatter", srcs, dsts)


def all_to_all(srcs, dsts, replica_group, collective_dim, priority=None, name=None) -> None:
    """Each rank's part ``j`` goes to rank ``j``: one rank keeps its data."""
    _collective_dim("all_to_all", srcs, collective_dim)
    _one_core("all_to_all", replica_group)
    _copy_all("all_to_all", srcs, dsts)


def collective_permute(srcs, dsts, source_target_pairs, priority=None, name=None) -> None:
    """Send along explicit (source, target) pairs: only (0, 0) on one core; HBM only, one
    tensor."""
    pairs = [tuple(int(v) for v in p) for p in source_target_pairs]
    if pairs != [(0, 0)]:
        refuse("nki.collectives.collective_permute", f"source-target pairs {pairs} {_MULTI}")
    if len(list(srcs)) != 1 or any(t.on_chip for t in list(srcs) + list(dsts)):
        raise current().error("collective operands", "nki.collectives.collective_permute: one "
                              "HBM source and one HBM destination")
    _copy_all("collective_permute", srcs, dsts)


def rank_id(name=None) -> int:
    """This core's rank: 0."""
    return 0


all_gather_v = unsupported("nki.collectives.all_gather_v", "variable-size collectives read "
                           "per-rank counts from a metadata tensor; " + _MULTI)
all_to_all_v = unsupported("nki.collectives.all_to_all_v", "variable-size collectives read "
                           "per-rank counts from a metadata tensor; " + _MULTI)
collective_permute_implicit = unsupported("nki.collectives.collective_permute_implicit",
                                          "a ring over the group " + _MULTI)
collective_permute_implicit_reduce = unsupported(
    "nki.collectives.collective_permute_implicit_reduce", "a ring over the group " + _MULTI)
collective_permute_implicit_current_processing_rank_id = unsupported(
    "nki.collectives.collective_permute_implicit_current_processing_rank_id",
    "a ring over the group " + _MULTI)

__all__ = ["ReplicaGroup", "all_reduce", "all_gather", "all_gather_v", "reduce_scatter",
           "all_to_all", "all_to_all_v", "collective_permute", "collective_permute_implicit",
           "collective_permute_implicit_reduce",
           "collective_permute_implicit_current_processing_rank_id", "rank_id"]
