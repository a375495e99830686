"""``nki.collectives`` on one NeuronCore (issue 13: a replica group of one): each collective over
rank 0 alone leaves every destination equal to its source, on HBM and on SBUF; other groups and
the ring / variable-size forms are refused by name (several cores are issue 18)."""
from __future__ import annotations

import numpy as np
import pytest

from neuron_customcall.nki import collectives as cc
from neuron_customcall import nki
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import KernelTraceError, UnsupportedAPIError

ONE = cc.ReplicaGroup([[0]])


@nki.jit
def on_hbm(a, b, how):
    """Two HBM tensors through one collective at once (coalesced), results returned."""
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    y = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.shared_hbm)
    srcs, dsts = [a, b], [x, y]
    if how == "all_reduce":
        cc.all_reduce(srcs, dsts, ONE, nl.add)
    elif how == "all_gather":
        cc.all_gather(srcs, dsts, ONE, 0)
    elif how == "reduce_scatter":
        cc.reduce_scatter(srcs, dsts, ONE, 0, nl.maximum)
    elif how == "all_to_all":
        cc.all_to_all(srcs, dsts, replica_group=cc.ReplicaGroup(replica_groups=[[0]]),
                      collective_dim=0)
    else:
        cc.collective_permute([a], [x], [(0, 0)])
        cc.collective_permute([b], [y], [(0, 0)])
    assert cc.rank_id() == 0
    return x, y


@pytest.mark.parametrize("how", ["all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                 "collective_permute"])
def test_one_rank_collectives_on_hbm(how):
    rng = np.random.default_rng(12)
    a = rng.random((256, 64)).astype(np.float32)
    b = rng.random((4, 32, 16)).astype(np.float32)
    x, y = on_hbm(a, b, how)
    np.testing.assert_array_equal(x, a)
    np.testing.assert_array_equal(y, b)


@nki.jit
def on_sbuf(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    r = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    cc.all_reduce([t], [r], ONE, nl.add)
    g = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    cc.all_gather([r], [g], ONE, 1)
    nl.store(out, g)
    return out


def test_one_rank_collectives_on_sbuf():
    a = np.random.default_rng(13).random((128, 32)).astype(np.float32)
    np.testing.assert_array_equal(on_sbuf(a), a)


@nki.jit
def bad(a, how):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    if how == "group":
        cc.all_reduce([a], [out], cc.ReplicaGroup([[0, 1]]), nl.add)
    elif how == "pairs":
        cc.collective_permute([a], [out], [(0, 1), (1, 0)])
    elif how == "ring":
        cc.collective_permute_implicit([[a]], [[out]], ONE)
    elif how == "op":
        cc.all_reduce([a], [out], ONE, nl.subtract)
    elif how == "mixed":
        cc.all_reduce([a], [nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)], ONE, nl.add)
    else:
        cc.all_gather([a], [out], ONE, 1)
    return out


@pytest.mark.parametrize("how, error, message", [
    ("group", UnsupportedAPIError, r"all_reduce is not supported .*\[\[0, 1\]\].*several NeuronCores"),
    ("pairs", UnsupportedAPIError, r"collective_permute is not supported"),
    ("ring", UnsupportedAPIError, r"collective_permute_implicit is not supported"),
    ("op", KernelTraceError, "nl.add, nl.minimum or nl.maximum"),
    ("mixed", KernelTraceError, "all on HBM or all on SBUF"),
    ("dim", KernelTraceError, r"collective_dim 1 \(supported: \(0,\)\)"),
])
def test_other_groups_and_forms_are_refused_by_name(how, error, message):
    with pytest.raises(error, match=message):
        bad(np.zeros((128, 8), np.float32), how)


def test_replica_groups_may_not_overlap():
    with pytest.raises(ValueError, match="overlap"):
        cc.ReplicaGroup([[0, 1], [1, 2]])
