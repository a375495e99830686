"""Collectives on the platform's NeuronLink: ring algorithms over the NeuronCores of a replica group.

Why a model of its own: a collective's time is set by the links between the cores, not by the
core's DMA of its result (how collectives were costed before). The runtime's documented
algorithms (nrt "Intra-node collective communication": Ring, Mesh, KangaRing, RDH) are all
bounded below by the ring's bandwidth term; the ring is the one with published step counts and
per-hop latency, so it is the model:

* the group's members form a ring in group order (member i sends to member i+1, the last to
  the first); each ring step moves one chunk over every hop at once, so a step takes
  `HOP_LATENCY_S + chunk / slowest hop bandwidth`;
* the platform is the selected one (emulator/platforms.py: trn1 by default, trn2 with
  NEURON_PLATFORM_TARGET_OVERRIDE, its LNC with NEURON_LOGICAL_NC_CONFIG), read when the
  collective is costed; device d (XLA's flat id) is logical NeuronCore d, on chip
  d // cores_per_chip (trn1: 2; trn2: 4 at LNC=2, 8 at LNC=1), in instance chip // chips_per_instance;
* a hop between two cores of one chip stays on the chip (`Topology.intra_chip_bytes_per_second`:
  a core's share of the chip's HBM and DMA bandwidth); a hop to another chip of the instance takes
  NeuronLink (trn1: v2, 384 GiB/s a chip; trn2: v3, 1,024 GB/s), shared by the ring's hops that
  leave the same chip; a hop to another instance takes the inter-instance NeuronLink where the
  platform publishes one (trn2 UltraServer: 256 GB/s a chip), shared the same way;
* step counts (n members, S bytes of the operand; of the result for all-gather):
  all-reduce 2(n-1) steps of S/n (each member sends 2(n-1)/n of S: reduce-scatter then
  all-gather), all-gather, reduce-scatter and all-to-all n-1 steps of S/n (ragged-all-to-all:
  the same, its whole input S as if split evenly), collective-broadcast
  n-1 hops of latency then S at the slowest hop (pipelined), collective-permute and send/recv one
  step of S over the slowest of their pairs' hops;
* reductions happen as the data moves (the DMA engines that carry it), so they add no time of
  their own; a group of one moves nothing and costs the DMA of its result (a copy).

All of it runs on the DMA engine's timeline. Constants and their sources: constants.py and
docs/cost-model.md ("Collectives").
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from emulator import platforms
from emulator.cost import constants as C
from emulator.cost.dma import dma_cycles
from emulator.cost.engines import DMA, Cost
from emulator.cost.shapes import nbytes

#: kind -> (ring steps, bytes per step) as functions of the group size n and the bytes S
RING_STEPS: dict[str, Callable[[int, float], tuple[int, float]]] = {
    "all-reduce": lambda n, s: (2 * (n - 1), s / n),
    "all-gather": lambda n, s: (n - 1, s / n),
    "reduce-scatter": lambda n, s: (n - 1, s / n),
    "all-to-all": lambda n, s: (n - 1, s / n),
    # at most its whole input, as if evenly split (the sizes are data)
    "ragged-all-to-all": lambda n, s: (n - 1, s / n),
}


def _topology(topo: platforms.Topology | None) -> platforms.Topology:
    return platforms.current() if topo is None else topo


def _link(topo: platforms.Topology, s: int, t: int) -> tuple[str, float] | None:
    """The link a hop from core s to core t takes and that link's rate per chip; None on one chip."""
    if topo.chip_of(s) == topo.chip_of(t):
        return None
    inter = topo.platform.inter_instance_bytes_per_second_per_chip
    if inter is not None and topo.instance_of(s) != topo.instance_of(t):
        return "between instances", inter
    return "NeuronLink", topo.platform.link_bytes_per_second_per_chip


def hop_bandwidth(hops: Sequence[tuple[int, int]], topo: platforms.Topology | None = None) -> float:
    """Bytes per second of the slowest of `hops` (source, target cores) when all carry data at
    once: on-chip hops at the intra-chip rate, chip-to-chip hops at their link's rate per chip
    divided among the hops that leave that chip on the same link."""
    topo = _topology(topo)
    moving = [(topo.chip_of(s), _link(topo, s, t)) for s, t in hops if s != t]
    leaving: dict[tuple[int, str], int] = {}
    for chip, link in moving:
        if link is not None:
            leaving[(chip, link[0])] = leaving.get((chip, link[0]), 0) + 1
    rates = [topo.intra_chip_bytes_per_second if link is None else link[1] / leaving[(chip, link[0])]
             for chip, link in moving]
    return min(rates) if rates else math.inf


def ring_hops(group: Sequence[int]) -> list[tuple[int, int]]:
    """Member i to member i+1, the last to the first."""
    return [(group[i], group[(i + 1) % len(group)]) for i in range(len(group))]


def _cycles(seconds: float) -> float:
    return math.ceil(seconds * C.CLOCK_HZ)


def ring_seconds(kind: str, group: Sequence[int], n_bytes: float,
                 topo: platforms.Topology | None = None) -> float:
    """Seconds of a ring collective `kind` (a RING_STEPS key) of `n_bytes` over `group`."""
    steps, chunk = RING_STEPS[kind](len(group), n_bytes)
    return steps * (C.HOP_LATENCY_S + chunk / hop_bandwidth(ring_hops(group), topo))


def broadcast_seconds(group: Sequence[int], n_bytes: float, topo: platforms.Topology | None = None) -> float:
    """A pipelined ring broadcast from the group's first member: n-1 hops of latency, then the
    bytes at the slowest hop's rate."""
    hops = ring_hops(group)[:-1]
    return len(hops) * C.HOP_LATENCY_S + n_bytes / hop_bandwidth(hops, topo)


def permute_seconds(pairs: Sequence[tuple[int, int]], n_bytes: float,
                    topo: platforms.Topology | None = None) -> float:
    """Every source sends `n_bytes` to its target at once (collective-permute, send/recv)."""
    moving = [(s, t) for s, t in pairs if s != t]
    if not moving:
        return 0.0
    return C.HOP_LATENCY_S + n_bytes / hop_bandwidth(moving, topo)


def collective_cost(kind: str, group: Sequence[int], n_bytes: float,
                    pairs: Sequence[tuple[int, int]] = (), topo: platforms.Topology | None = None) -> Cost:
    """The cost of collective `kind` ("all-reduce", ..., "collective-broadcast",
    "collective-permute", "send") for one member of `group` (flat device ids, in order) on
    `topo` (default: the selected platform, emulator/platforms.py)."""
    topo = _topology(topo)
    if kind in ("collective-permute", "send"):
        seconds = permute_seconds(pairs, n_bytes, topo)
        return {DMA: _cycles(seconds)} if seconds else {DMA: dma_cycles(n_bytes)}
    if len(group) <= 1:
        return {DMA: dma_cycles(n_bytes)}
    if kind == "collective-broadcast":
        return {DMA: _cycles(broadcast_seconds(group, n_bytes, topo))}
    return {DMA: _cycles(ring_seconds(kind, group, n_bytes, topo))}


# -- program instructions (emulator.cost.graph: the "collective" rule) -----------------------
def _sized_bytes(ctx: Any) -> float:
    """S of an HLO collective: its operands' bytes; all-gather's result (the gathered value);
    ragged-all-to-all's input (the other operands are its output buffer and indices)."""
    if ctx.op in ("ragged-all-to-all", "send"):  # the data, not the output buffer, indices or token
        return float(nbytes(ctx.in_types[0]))
    if ctx.op == "collective_permute_in_place":  # the slices each source sends, not the whole input
        t = ctx.in_types[0]
        leaves = t[1] if t[0] == "tuple" else [t]
        groups = _in_place_groups(ctx)
        return float(sum(nbytes((leaf[0], sizes)) for e, leaf in enumerate(leaves)
                         for sizes in ctx.attrs["slice_sizes"][e * groups:(e + 1) * groups]))
    if ctx.op == "all-gather":
        t = ctx.type
        if ctx.attrs.get("start") and t[0] == "tuple":
            t = t[1][1]
        return float(nbytes(t))
    return float(sum(nbytes(t) for t in ctx.in_types))


def instruction_coster(ctx: Any) -> Callable[[], Cost]:
    """The cost of one execution of a collective instruction, for the device it runs as (the
    group, and so the cores and chips it spans, is known only then: emulator.collectives)."""
    from emulator.collectives.context import current
    from emulator.collectives.groups import GroupError, flat_pairs, participants

    n_bytes = _sized_bytes(ctx)
    attrs = ctx.attrs
    cache: dict[tuple[Any, ...], Cost] = {}

    def cost() -> Cost:
        dev = current()
        topo = platforms.current()
        key = (dev.replica_id, dev.partition_id, dev.num_replicas, dev.num_partitions)
        if (topo, key) not in cache:
            cache[(topo, key)] = _member_cost(key, topo)
        return cache[(topo, key)]

    def _member_cost(key: tuple[int, int, int, int], topo: platforms.Topology) -> Cost:
        try:
            if ctx.op == "send":  # replica ids with several replicas, else partition ids
                mode = "cross_replica" if key[2] > 1 else "cross_partition"
                return collective_cost("send", (), n_bytes,
                                       flat_pairs(mode, [tuple(p) for p in attrs["pairs"]], *key), topo)
            if ctx.op in ("collective-permute", "collective_permute_in_place"):
                pairs = flat_pairs(attrs["mode"], [tuple(p) for p in attrs["pairs"]], *key) \
                    if ctx.op == "collective-permute" else _in_place_pairs(ctx, key)
                return collective_cost("collective-permute", (), n_bytes, pairs, topo)
            group = participants(attrs["mode"], [list(g) for g in attrs["groups"]], *key)
            return collective_cost(ctx.op, group, n_bytes, topo=topo)
        except GroupError:  # the collective itself refuses this device (and says why)
            return {}
    return cost


def _in_place_groups(ctx: Any) -> int:
    """How many groups the in-place permute's pairs form: its slice lists per input leaf."""
    t = ctx.in_types[0]
    return len(ctx.attrs["slice_sizes"]) // (len(t[1]) if t[0] == "tuple" else 1)


def _in_place_pairs(ctx: Any, key: tuple[int, int, int, int]) -> list[tuple[int, int]]:
    """The in-place permute's pairs as flat ids, group by group (each group is a permutation;
    together they may repeat a source, which one flat_pairs call refuses)."""
    from emulator.collectives.groups import flat_pairs

    pairs = [tuple(p) for p in ctx.attrs["pairs"]]
    groups = _in_place_groups(ctx)
    per = len(pairs) // groups
    return [fp for k in range(groups) for fp in flat_pairs(ctx.attrs["mode"], pairs[k * per:(k + 1) * per], *key)]


# -- NKI kernel IR (emulator.cost.kernel_ir): the `collective` instruction ---------------------
#: nki.collectives kind -> the HLO collective whose ring it runs
_KERNEL_KINDS = {"all_reduce": "all-reduce", "all_gather": "all-gather", "reduce_scatter": "reduce-scatter",
                 "all_to_all": "all-to-all", "all_gather_v": "all-gather", "all_to_all_v": "all-to-all"}


def kernel_collective(attrs: dict[str, Any], src_bytes: float, dst_bytes: float) -> Cost:
    """An nki.collectives instruction: the first of its replica groups as the ring; permutes
    (and the one-step ring forms, each member to its successor) as one step of the source."""
    size = int(attrs.get("group_size") or 0)
    flat = [int(g) for g in attrs.get("groups") or ()]
    group = flat[:size] if size else flat
    kind = str(attrs.get("kind", ""))
    if kind == "permute":
        p = [int(v) for v in attrs.get("pairs") or ()]
        return collective_cost("collective-permute", (), src_bytes, list(zip(p[0::2], p[1::2])))
    if kind in _KERNEL_KINDS:
        hlo = _KERNEL_KINDS[kind]
        return collective_cost(hlo, group, dst_bytes if hlo == "all-gather" else src_bytes)
    # ring / ring_reduce and the rest: one step of the source to the successor in the group
    return collective_cost("collective-permute", (), src_bytes, ring_hops(group))
