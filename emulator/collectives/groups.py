"""Who takes part in a collective: XLA's group modes over (replica, partition) devices.

XLA reads an instruction's replica_groups according to its group mode (GetCollectiveOpGroupMode
in xla/service/collective_ops_utils): without a channel_id the ids are replica ids
(cross-replica); with one, partition ids when the instruction has no use_global_device_ids
field (all-to-all, collective-permute, collective-broadcast: cross-partition), replica ids over
every partition when it is false (cross-replica-and-partition), flattened ids replica *
num_partitions + partition when it is true (flattened-id). Empty groups mean every id (not
allowed in flattened-id mode). Participants come in the group's order, which fixes the order of
gathered pieces and of reductions.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

CROSS_REPLICA = "cross_replica"
CROSS_PARTITION = "cross_partition"
CROSS_REPLICA_AND_PARTITION = "cross_replica_and_partition"
FLATTENED_ID = "flattened_id"
MODES = (CROSS_REPLICA, CROSS_PARTITION, CROSS_REPLICA_AND_PARTITION, FLATTENED_ID)


class GroupError(ValueError):
    """replica_groups or pairs that do not describe the devices of this run."""


def group_mode(has_channel_id: bool, use_global_device_ids: bool | None) -> str:
    """XLA's group mode; `use_global_device_ids` is None for instructions without the field."""
    if not has_channel_id:
        if use_global_device_ids:
            raise GroupError("use_global_device_ids=true needs a channel_id")
        return CROSS_REPLICA
    if use_global_device_ids is None:
        return CROSS_PARTITION
    return FLATTENED_ID if use_global_device_ids else CROSS_REPLICA_AND_PARTITION


def iota_groups(num_groups: int, group_size: int, reshape_dims: Sequence[int],
                transpose_perm: Sequence[int]) -> list[list[int]]:
    """The explicit groups of the iota form `[groups,size]<=[dims]T(perm)` (IotaReplicaGroupList)."""
    dims = [int(d) for d in reshape_dims]
    perm = [int(p) for p in transpose_perm] or list(range(len(dims)))
    if sorted(perm) != list(range(len(dims))):
        raise GroupError(f"iota replica groups: T{tuple(perm)} is not a permutation of {len(dims)} dimensions")
    if num_groups * group_size != int(np.prod(dims, dtype=np.int64)):
        raise GroupError(f"iota replica groups [{num_groups},{group_size}] do not hold the {dims} devices")
    ids = np.arange(num_groups * group_size).reshape(dims).transpose(perm).reshape(num_groups, group_size)
    return ids.tolist()


def _group_of(groups: Sequence[Sequence[int]], me: int, count: int | None, what: str) -> list[int]:
    if not groups:
        if count is None:
            raise GroupError("flattened-id mode (use_global_device_ids) needs explicit replica_groups")
        return list(range(count))
    found = [list(g) for g in groups if me in g]
    if len(found) != 1:
        raise GroupError(f"{what} {me} is in {len(found)} of the replica groups {[list(g) for g in groups]}")
    return found[0]


def participants(mode: str, groups: Sequence[Sequence[int]], replica: int, partition: int,
                 num_replicas: int, num_partitions: int) -> tuple[int, ...]:
    """The flat device ids (replica * num_partitions + partition) of this device's group, in order."""
    if mode == CROSS_REPLICA:
        ids = _group_of(groups, replica, num_replicas, "replica")
        flat = [r * num_partitions + partition for r in ids]
        limit, bad = num_replicas, [r for r in ids if not 0 <= r < num_replicas]
    elif mode == CROSS_PARTITION:
        ids = _group_of(groups, partition, num_partitions, "partition")
        flat = [replica * num_partitions + p for p in ids]
        limit, bad = num_partitions, [p for p in ids if not 0 <= p < num_partitions]
    elif mode == CROSS_REPLICA_AND_PARTITION:
        ids = _group_of(groups, replica, num_replicas, "replica")
        flat = [r * num_partitions + p for r in ids for p in range(num_partitions)]
        limit, bad = num_replicas, [r for r in ids if not 0 <= r < num_replicas]
    elif mode == FLATTENED_ID:
        ids = _group_of(groups, replica * num_partitions + partition, None, "device")
        flat = list(ids)
        limit = num_replicas * num_partitions
        bad = [d for d in ids if not 0 <= d < limit]
    else:
        raise GroupError(f"unknown group mode {mode!r}")
    if bad:
        raise GroupError(f"replica group {ids} names ids {bad} outside 0..{limit - 1} ({mode.replace('_', '-')})")
    if len(set(flat)) != len(flat):
        raise GroupError(f"replica group {ids} names a device twice")
    return tuple(flat)


def flat_pairs(mode: str, pairs: Sequence[Sequence[int]], replica: int, partition: int,
               num_replicas: int, num_partitions: int) -> list[tuple[int, int]]:
    """collective-permute's (source, target) pairs of this device's replica or partition, as flat
    device ids. Replica ids without a channel_id, partition ids with one."""
    if mode == CROSS_REPLICA:
        count, flat = num_replicas, lambda r: r * num_partitions + partition
    elif mode == CROSS_PARTITION:
        count, flat = num_partitions, lambda p: replica * num_partitions + p
    else:
        raise GroupError(f"collective-permute has no {mode.replace('_', '-')} mode")
    out = []
    for s, t in pairs:
        if not (0 <= s < count and 0 <= t < count):
            raise GroupError(f"source_target_pair {{{s},{t}}} is outside 0..{count - 1}")
        out.append((flat(s), flat(t)))
    if len({s for s, _ in out}) != len(out) or len({t for _, t in out}) != len(out):
        raise GroupError(f"source_target_pairs {[list(p) for p in pairs]} repeat a source or a target")
    return out
