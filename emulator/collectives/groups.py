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

import math
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


def mesh_device_array(axis_sizes: Sequence[int], device_ids: Sequence[int] = (),
                      iota_reshape: Sequence[int] = (), iota_perm: Sequence[int] = ()) -> np.ndarray:
    """A mesh's devices (XLA's MeshProto) as an array of `axis_sizes`: explicit `device_ids`,
    else an iota (reshaped by `iota_reshape` and transposed by `iota_perm` when given)."""
    sizes = [int(s) for s in axis_sizes]
    if not sizes or any(s < 1 for s in sizes):
        raise GroupError(f"a mesh of axis sizes {sizes}")
    count = math.prod(sizes)
    if device_ids:
        if len(device_ids) != count:
            raise GroupError(f"a mesh of axes {sizes} lists {len(device_ids)} devices")
        return np.asarray(device_ids, np.int64).reshape(sizes)
    ids = np.arange(count)
    if iota_reshape:
        dims = [int(d) for d in iota_reshape]
        perm = [int(p) for p in iota_perm] or list(range(len(dims)))
        if math.prod(dims) != count or sorted(perm) != list(range(len(dims))):
            raise GroupError(f"mesh iota {dims}T{tuple(perm)} does not hold the {count} devices of axes {sizes}")
        ids = ids.reshape(dims).transpose(perm)
    return ids.reshape(sizes)


def _split_dimension(full: int, refs: Sequence[tuple[int, int | None, int | None]]) -> tuple[list[int], list[int]]:
    """One mesh dimension of size `full` named by `refs` (position among the group's axes, sub-axis
    pre-size, sub-axis size; None: the whole axis): the sizes it splits into and, in the refs'
    order, which of them the group spans (XLA's MeshAxesReplicaGroupList)."""
    if len(refs) == 1 and refs[0][1] is None:
        return [full], [0]
    if any(pre is None for _, pre, _ in refs):
        raise GroupError("a mesh axis named both whole and by sub-axes")
    order = sorted(range(len(refs)), key=lambda k: refs[k][1])  # type: ignore[arg-type, return-value]
    dims: list[int] = []
    spans = [0] * len(refs)
    prefix = 1
    for k in order:
        _, pre, size = refs[k]
        if pre % prefix or size < 1:  # type: ignore[operator]
            raise GroupError(f"sub-axis ({pre}){size} of a mesh axis of {full} overlaps another")
        if pre != prefix:
            dims.append(pre // prefix)  # type: ignore[operator]
            prefix = pre  # type: ignore[assignment]
        spans[k] = len(dims)
        dims.append(size)  # type: ignore[arg-type]
        prefix *= size  # type: ignore[operator]
    if full % prefix:
        raise GroupError(f"sub-axes {[(p, s) for _, p, s in refs]} do not divide a mesh axis of {full}")
    if prefix != full:
        dims.append(full // prefix)
    return dims, spans


def mesh_axes_groups(mesh: np.ndarray, axes: Sequence[tuple[int, int | None, int | None]]) -> list[list[int]]:
    """The explicit groups of XLA's mesh-axes form: the devices of `mesh` that differ only along
    the named axes (axis index, sub-axis pre-size, sub-axis size; None: the whole axis) form one
    group, ordered along those axes in the order they are named (the first named varies slowest;
    what XLA:CPU does, checked through jaxlib)."""
    by_dim: dict[int, list[int]] = {}  # mesh dimension -> positions in `axes` of its refs
    for k, (a, _, _) in enumerate(axes):
        if not 0 <= a < mesh.ndim:
            raise GroupError(f"mesh axis {a} of a mesh of {mesh.ndim} axes")
        by_dim.setdefault(int(a), []).append(k)
    sizes: list[int] = []
    position = [0] * len(axes)  # the reshaped dimension each named axis became
    for dim, full in enumerate(mesh.shape):
        if dim not in by_dim:
            sizes.append(int(full))
            continue
        dims, spans = _split_dimension(int(full), [axes[k] for k in by_dim[dim]])
        for k, span in zip(by_dim[dim], spans):
            position[k] = len(sizes) + span
        sizes += dims
    if len(set(position)) != len(position):
        raise GroupError(f"mesh axes {list(axes)} name one axis twice")
    group_size = math.prod(sizes[p] for p in position)
    if group_size < 2:
        raise GroupError(f"mesh-axes replica groups of {group_size} device (XLA needs more than one)")
    rest = [k for k in range(len(sizes)) if k not in position]
    ids = mesh.reshape(sizes).transpose(rest + position).reshape(-1, group_size)
    return ids.tolist()
