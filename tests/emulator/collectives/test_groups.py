"""XLA's group modes and replica-group forms (emulator.collectives.groups), by their definitions."""
from __future__ import annotations

import numpy as np
import pytest

from emulator.collectives.groups import (CROSS_PARTITION, CROSS_REPLICA, CROSS_REPLICA_AND_PARTITION, FLATTENED_ID,
                                         GroupError, flat_pairs, group_mode, iota_groups, mesh_axes_groups,
                                         mesh_device_array, participants)


@pytest.mark.parametrize("channel, use_global, mode", [
    (False, None, CROSS_REPLICA), (False, False, CROSS_REPLICA), (True, None, CROSS_PARTITION),
    (True, False, CROSS_REPLICA_AND_PARTITION), (True, True, FLATTENED_ID),
])
def test_group_mode_is_xlas_table(channel, use_global, mode):
    assert group_mode(channel, use_global) == mode


def test_global_ids_without_a_channel_are_refused():
    with pytest.raises(GroupError, match="needs a channel_id"):
        group_mode(False, True)


@pytest.mark.parametrize("args, groups", [
    ((2, 2, [4], []), [[0, 1], [2, 3]]),
    ((2, 2, [2, 2], [1, 0]), [[0, 2], [1, 3]]),
    ((2, 4, [4, 2], [1, 0]), [[0, 2, 4, 6], [1, 3, 5, 7]]),
    ((4, 2, [2, 2, 2], [2, 0, 1]), [[0, 2], [4, 6], [1, 3], [5, 7]]),
])
def test_iota_groups(args, groups):
    assert iota_groups(*args) == groups


def test_iota_groups_that_do_not_add_up_are_refused():
    with pytest.raises(GroupError, match=r"do not hold"):
        iota_groups(2, 3, [4], [])
    with pytest.raises(GroupError, match="not a permutation"):
        iota_groups(2, 2, [2, 2], [0, 0])


def test_participants_in_each_mode():
    # 2 replicas x 3 partitions: device = replica * 3 + partition
    assert participants(CROSS_REPLICA, [], 1, 2, 2, 3) == (2, 5)
    assert participants(CROSS_PARTITION, [[2, 0], [1]], 1, 0, 2, 3) == (5, 3)
    assert participants(CROSS_PARTITION, [], 0, 1, 2, 3) == (0, 1, 2)
    assert participants(CROSS_REPLICA_AND_PARTITION, [[1, 0]], 0, 2, 2, 3) == (3, 4, 5, 0, 1, 2)
    assert participants(FLATTENED_ID, [[5, 0], [1, 2, 3, 4]], 1, 2, 2, 3) == (5, 0)


@pytest.mark.parametrize("mode, groups, message", [
    (CROSS_REPLICA, [[0, 1]], "replica 2 is in 0"),
    (CROSS_REPLICA, [[0, 2, 7]], r"ids \[7\] outside 0..3"),
    (FLATTENED_ID, [], "needs explicit replica_groups"),
    (CROSS_REPLICA, [[2, 2]], "is in 2 of|twice"),
])
def test_bad_groups_are_refused(mode, groups, message):
    with pytest.raises(GroupError, match=message):
        participants(mode, groups, 2, 0, 4, 1)


def test_permute_pairs_become_flat_device_ids_of_this_replica_or_partition():
    assert flat_pairs(CROSS_REPLICA, [[0, 1], [1, 0]], 0, 1, 2, 2) == [(1, 3), (3, 1)]
    assert flat_pairs(CROSS_PARTITION, [[0, 1]], 1, 0, 2, 2) == [(2, 3)]
    with pytest.raises(GroupError, match="repeat a source or a target"):
        flat_pairs(CROSS_REPLICA, [[0, 1], [2, 1]], 0, 0, 4, 1)
    with pytest.raises(GroupError, match="outside"):
        flat_pairs(CROSS_REPLICA, [[0, 4]], 0, 0, 4, 1)


def _mesh_reference(mesh: np.ndarray, named: list[tuple[int, int]]) -> list[list[int]]:
    """Groups by brute force: `named` lists (dimension of the fully split mesh, ...) in naming
    order; devices agreeing on every other dimension form a group, ordered by the named
    dimensions' indices (the first named slowest)."""
    groups: dict[tuple, list[tuple[tuple, int]]] = {}
    for index in np.ndindex(mesh.shape):
        key = tuple(i for k, i in enumerate(index) if k not in [d for d, _ in named])
        groups.setdefault(key, []).append((tuple(index[d] for d, _ in named), int(mesh[index])))
    return [[dev for _, dev in sorted(members)] for _, members in sorted(groups.items())]


def test_mesh_axes_groups_whole_axes():
    mesh = mesh_device_array([2, 4])
    assert mesh_axes_groups(mesh, [(1, None, None)]) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert mesh_axes_groups(mesh, [(0, None, None)]) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert mesh_axes_groups(mesh, [(1, None, None), (0, None, None)]) == [[0, 4, 1, 5, 2, 6, 3, 7]]


def test_mesh_axes_groups_sub_axes_explicit_ids_and_iota_against_brute_force():
    ids = (5, 1, 0, 7, 2, 6, 3, 4)
    mesh = mesh_device_array([2, 4], ids)
    assert mesh.tolist() == [[5, 1, 0, 7], [2, 6, 3, 4]]
    # y:(2)2 is the minor factor of y=4 (pre-size 2 before it): the mesh split as [2, 2, 2]
    split = mesh.reshape(2, 2, 2)
    assert mesh_axes_groups(mesh, [(1, 2, 2)]) == _mesh_reference(split, [(2, 0)])
    assert mesh_axes_groups(mesh, [(1, 1, 2), (0, None, None)]) == _mesh_reference(split, [(1, 0), (0, 0)])
    iota = mesh_device_array([2, 4], (), [4, 2], [1, 0])
    assert iota.tolist() == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert mesh_axes_groups(iota, [(1, None, None)]) == [[0, 2, 4, 6], [1, 3, 5, 7]]
    eight = mesh_device_array([8])
    assert mesh_axes_groups(eight, [(0, 4, 2)]) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert mesh_axes_groups(eight, [(0, 1, 2), (0, 4, 2)]) == _mesh_reference(np.arange(8).reshape(2, 2, 2),
                                                                              [(0, 0), (2, 0)])


@pytest.mark.parametrize("sizes, axes, message", [
    ([2, 4], [(2, None, None)], "mesh axis 2 of a mesh of 2 axes"),
    ([2, 4], [(1, 2, 4)], "do not divide"),
    ([8], [(0, 1, 4), (0, 2, 2)], "overlaps"),
    ([2, 1], [(1, None, None)], "of 1 device"),
])
def test_bad_mesh_axes_are_named(sizes, axes, message):
    with pytest.raises(GroupError, match=message):
        mesh_axes_groups(mesh_device_array(sizes), axes)
