"""``nki.collectives`` across emulated NeuronCores (issue 18): each collective against NumPy on 2
and 4 cores (the kernel run by every device of ``run_devices``, as a program on several cores
runs it), in an HLO program beside an HLO all-reduce, a failing peer, and one core on its own
(rank 0 of a world of one)."""
from __future__ import annotations

import numpy as np
import pytest

import hlo
from emulator import load_artifact
from emulator.collectives import CollectiveError, run_devices
from emulator.errors import EmulatorError
from emulator.kernel_exec.errors import KernelRuntimeError
from neuron_customcall import nki
from neuron_customcall.compiler import compile_module
from neuron_customcall.kernels import build
from neuron_customcall.nki import TensorSpec
from neuron_customcall.nki import collectives as cc
from neuron_customcall.nki.isa import beta2 as nisa
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import KernelTraceError, UnsupportedAPIError

ONE = cc.ReplicaGroup([[0]])


def _frozen(v):
    """Lists as tuples (static kernel arguments are hashable)."""
    return tuple(_frozen(x) for x in v) if isinstance(v, (list, tuple)) else v


class KernelOnEachCore:
    """What run_devices runs on every device: the kernel on that device's NumPy inputs."""

    def __init__(self, launch, **kwargs):
        self.launch, self.kwargs = launch, {k: _frozen(v) for k, v in kwargs.items()}

    def run(self, inputs):
        out = self.launch(*inputs, **self.kwargs)
        return list(out) if isinstance(out, tuple) else [out]


def on_cores(launch, inputs, n, **kwargs):
    return [o for o in run_devices(KernelOnEachCore(launch, **kwargs), [[x] for x in inputs], n, 1,
                                   timeout_s=60)]


@nki.jit
def hbm_collective(a, how, groups, dim=0):
    n = len(groups[0])
    shape = list(a.shape)
    if how == "all_gather":
        shape[dim] *= n
    elif how == "reduce_scatter":
        shape[dim] //= n
    out = nl.ndarray(tuple(shape), dtype=a.dtype, buffer=nl.shared_hbm)
    group = cc.ReplicaGroup(groups)
    if how == "all_reduce":
        cc.all_reduce([a], [out], group, nl.add)
    elif how == "all_reduce_max":
        cc.all_reduce(srcs=[a], dsts=[out], replica_group=group, op=nl.maximum)
    elif how == "all_gather":
        cc.all_gather([a], [out], group, dim)
    elif how == "reduce_scatter":
        cc.reduce_scatter([a], [out], group, dim, nl.add)
    else:
        cc.all_to_all([a], [out], group, dim)
    return out


def _inputs(n, shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype) for _ in range(n)]


def _reference(how, xs, groups, d, dim=0):
    """NumPy: what device d gets."""
    g = next(g for g in groups if d in g)
    vals = [xs[r].astype(np.float32) for r in g]
    me, n = g.index(d), len(g)
    if how == "all_reduce":
        return sum(vals[1:], vals[0].copy())
    if how == "all_reduce_max":
        return np.maximum.reduce(vals)
    if how == "all_gather":
        return np.concatenate(vals, axis=dim)
    if how == "reduce_scatter":
        return np.split(sum(vals[1:], vals[0].copy()), n, axis=dim)[me]
    return np.concatenate([np.split(v, n, axis=dim)[me] for v in vals], axis=dim)


@pytest.mark.parametrize("n, groups", [(2, [[0, 1]]), (4, [[0, 1, 2, 3]]), (4, [[0, 2], [3, 1]])])
@pytest.mark.parametrize("how", ["all_reduce", "all_reduce_max", "all_gather", "reduce_scatter",
                                 "all_to_all"])
def test_each_collective_on_hbm_against_numpy(how, n, groups):
    xs = _inputs(n, (8, 4, 6), seed=n)
    outs = on_cores(hbm_collective, xs, n, how=how, groups=groups)
    for d in range(n):
        np.testing.assert_allclose(outs[d][0], _reference(how, xs, groups, d), rtol=1e-6)


def test_all_reduce_is_folded_in_group_order_with_the_same_bits_everywhere():
    xs = _inputs(4, (16, 16), seed=3)
    groups = [[3, 1, 0, 2]]
    outs = on_cores(hbm_collective, xs, 4, how="all_reduce", groups=groups)
    expect = ((xs[3] + xs[1]) + xs[0]) + xs[2]
    for d in range(4):
        np.testing.assert_array_equal(outs[d][0], expect)


def test_bfloat16_all_reduce_accumulates_in_float32_and_rounds_once():
    import ml_dtypes
    xs = _inputs(4, (4, 8), dtype=ml_dtypes.bfloat16, seed=5)
    outs = on_cores(hbm_collective, xs, 4, how="all_reduce", groups=[[0, 1, 2, 3]])
    expect = sum(x.astype(np.float32) for x in xs).astype(ml_dtypes.bfloat16)
    for d in range(4):
        assert outs[d][0].dtype == ml_dtypes.bfloat16
        np.testing.assert_array_equal(outs[d][0], expect)


@nki.jit
def sbuf_collectives(a, groups):
    """all_reduce, then all_gather along the free axis, on SBUF tiles; rank ids through a
    register stored as data."""
    n = len(groups[0])
    group = cc.ReplicaGroup(groups)
    t = nl.load(a)
    r = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    cc.all_reduce([t], [r], group, nl.minimum)
    g = nl.ndarray((a.shape[0], a.shape[1] * n), dtype=a.dtype, buffer=nl.sbuf)
    cc.all_gather([t], [g], group, 1)
    out = nl.ndarray((a.shape[0], a.shape[1] * (n + 1)), dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out[:, 0:a.shape[1]], r)
    nl.store(out[:, a.shape[1]:], g)
    rank = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.register_store(rank, cc.rank_id())
    who = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    nl.store(who, rank)
    return out, who


@pytest.mark.parametrize("n", [2, 4])
def test_sbuf_collectives_and_rank_id(n):
    xs = _inputs(n, (32, 8), seed=7)
    outs = on_cores(sbuf_collectives, xs, n, groups=[list(range(n))])
    for d in range(n):
        np.testing.assert_array_equal(outs[d][0][:, :8], np.minimum.reduce(xs))
        np.testing.assert_array_equal(outs[d][0][:, 8:], np.concatenate(xs, axis=1))
        assert outs[d][1].item() == d


@nki.jit
def rows_from_rank(a):
    """rank_id as a dynamic offset (the nki library's rank_id_kernel pattern): each rank copies
    the 8 rows starting at row `rank`."""
    out = nl.ndarray((8, a.shape[1]), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((8, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a.ap([[a.shape[1], 8], [1, a.shape[1]]], scalar_offset=cc.rank_id(),
                                  indirect_dim=0))
    nisa.dma_copy(dst=out, src=t)
    return out


def test_rank_id_as_a_scalar_offset():
    a = np.arange(32 * 4, dtype=np.float32).reshape(32, 4)
    outs = on_cores(rows_from_rank, [a] * 4, 4)
    for d in range(4):
        np.testing.assert_array_equal(outs[d][0], a[d:d + 8])


@nki.jit
def permute(a, pairs):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.zeros(a.shape, dtype=a.dtype, buffer=nl.sbuf))
    cc.collective_permute([a], [out], pairs)
    return out


@pytest.mark.parametrize("n, pairs", [(2, [(0, 1), (1, 0)]), (4, [(0, 3), (3, 0), (1, 2)])])
def test_collective_permute(n, pairs):
    xs = _inputs(n, (16, 8), seed=9)
    outs = on_cores(permute, xs, n, pairs=pairs)
    for d in range(n):
        sources = [s for s, t in pairs if t == d]
        expect = xs[sources[0]] if sources else np.zeros_like(xs[d])  # untargeted: unchanged
        np.testing.assert_array_equal(outs[d][0], expect)


@nki.jit
def ring_all_gather(a, groups):
    """An all-gather written as a ring: at step k each rank holds the chunk of the rank k places
    before it (collective_permute_implicit_current_processing_rank_id), stored at that rank's
    row block through the register's value used as data."""
    n = len(groups[0])
    group = cc.ReplicaGroup(groups)
    rows = a.shape[0]
    out = nl.ndarray((n, rows, a.shape[1]), dtype=a.dtype, buffer=nl.shared_hbm)
    owners = nl.ndarray((1, n), dtype=nl.int32, buffer=nl.shared_hbm)
    bufs = [nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm) for _ in range(n)]
    nisa.dma_copy(bufs[0], a)
    for k in nl.static_range(n):
        t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.register_store(t, cc.collective_permute_implicit_current_processing_rank_id(k, group))
        nl.store(owners[0:1, k:k + 1], t)
        nisa.dma_copy(out[k], bufs[k])
        if k + 1 < n:
            cc.collective_permute_implicit([[bufs[k]]], [[bufs[k + 1]]], group)
    return out, owners


@pytest.mark.parametrize("n, groups", [(2, [[0, 1]]), (4, [[0, 1, 2, 3]]), (4, [[2, 0], [1, 3]])])
def test_ring_permute_and_processing_rank(n, groups):
    xs = _inputs(n, (8, 4), seed=11)
    outs = on_cores(ring_all_gather, xs, n, groups=groups)
    for d in range(n):
        g = next(g for g in groups if d in g)
        me = g.index(d)
        owners = [g[(me - k) % len(g)] for k in range(len(g))]
        assert outs[d][1].tolist() == [owners]
        for k, r in enumerate(owners):
            np.testing.assert_array_equal(outs[d][0][k], xs[r])


@nki.jit
def ring_reduce(a, b, groups):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    cc.collective_permute_implicit_reduce([[a]], [[b]], [[out]], cc.ReplicaGroup(groups),
                                          nl.maximum)
    return out


def test_ring_reduce_sends_the_reduction_to_the_successor():
    xs, ys = _inputs(4, (8, 8), seed=12), _inputs(4, (8, 8), seed=13)
    outs = run_devices(KernelOnEachCore(ring_reduce, groups=[[0, 1, 2, 3]]),
                       [[x, y] for x, y in zip(xs, ys)], 4, 1, timeout_s=60)
    for d in range(4):
        p = (d - 1) % 4
        np.testing.assert_array_equal(outs[d][0], np.maximum(xs[p], ys[p]))


@nki.jit
def per_program(a):
    """A grid of 2 programs, each all-reducing its own half with the same program of the other
    ranks (the grid runs vectorised: one exchange for both programs)."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    t = nl.load(a[i * 64 + nl.arange(64)[:, None], nl.arange(16)[None, :]])
    r = nl.ndarray((64, 16), dtype=a.dtype, buffer=nl.sbuf)
    cc.all_reduce([t], [r], cc.ReplicaGroup([[0, 1]]), nl.add)
    nl.store(out[i * 64 + nl.arange(64)[:, None], nl.arange(16)[None, :]], r)
    return out


def test_each_program_of_a_grid_makes_its_own_collective():
    xs = _inputs(2, (128, 16), seed=14)
    outs = on_cores(per_program[2], xs, 2)
    for d in range(2):
        np.testing.assert_allclose(outs[d][0], xs[0] + xs[1], rtol=1e-6)


@nki.jit
def variable(x, meta, how, n, rdispls, meta_on_sbuf):
    """all_gather_v / all_to_all_v into a zeroed destination of n slots of 16 elements; returns
    the destination and the metadata after the call (row 2: the received counts)."""
    out = nl.ndarray((n, 16), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.zeros((n, 16), dtype=x.dtype, buffer=nl.sbuf))
    rows = meta.shape[0]
    if meta_on_sbuf:
        m = nl.ndarray((1, rows, n), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.dma_copy(dst=m, src=meta.reshape((1, rows, n)))
    else:
        m = nl.ndarray((rows, n), dtype=nl.uint32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=m, src=meta)
    group = cc.ReplicaGroup([list(range(n))])
    if how == "all_gather_v":
        cc.all_gather_v([x], [out], group, m)
    else:
        cc.all_to_all_v([x], [out], group, metadata_tensor=m, has_rdispls=rdispls)
    meta_out = nl.ndarray((rows, n), dtype=nl.uint32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=meta_out, src=m)
    return out, meta_out


def _metadata(how, n, d, rng, rdispls):
    """Per-rank metadata: counts up to 16 per destination, displacements inside the 40-element
    source; received displacements (rdispls) at shuffled places of the 16 * n destination."""
    rows = 4 if rdispls else 3
    meta = np.zeros((rows, n), np.uint32)
    meta[0] = rng.integers(0, 9 if rdispls else 17, n)
    meta[1] = [rng.integers(0, 41 - c) for c in meta[0]]
    if how == "all_gather_v":
        meta[0, 1:], meta[1, 1:] = 99, 99  # only column 0 is read
    if rdispls:
        meta[3] = rng.permutation(n) * 8 + rng.integers(0, 9 * n - 8 * n + 1)
    return meta


@pytest.mark.parametrize("how, n, rdispls, sbuf", [
    ("all_gather_v", 2, False, False), ("all_gather_v", 4, False, True),
    ("all_to_all_v", 2, False, False), ("all_to_all_v", 4, False, True),
    ("all_to_all_v", 4, True, False)])
def test_variable_size_collectives_against_numpy(how, n, rdispls, sbuf):
    rng = np.random.default_rng(21 + n)
    xs = [rng.standard_normal(40).astype(np.float32) for _ in range(n)]
    metas = [_metadata(how, n, d, rng, rdispls) for d in range(n)]
    outs = run_devices(KernelOnEachCore(variable, how=how, n=n, rdispls=rdispls, meta_on_sbuf=sbuf),
                       [[x, m] for x, m in zip(xs, metas)], n, 1, timeout_s=60)
    for d in range(n):
        expect, counts = np.zeros(16 * n, np.float32), []
        for s in range(n):
            col = 0 if how == "all_gather_v" else d
            c, dp = int(metas[s][0, col]), int(metas[s][1, col])
            at = int(metas[d][3, s]) if rdispls else 16 * s
            expect[at:at + c] = xs[s][dp:dp + c]
            counts.append(c)
        np.testing.assert_array_equal(outs[d][0].ravel(), expect)
        assert outs[d][1][2].tolist() == counts
        np.testing.assert_array_equal(np.delete(outs[d][1], 2, axis=0), np.delete(metas[d], 2, axis=0))


def test_a_chunk_that_does_not_fit_its_slot_is_an_error():
    meta = np.array([[17, 0], [0, 0], [0, 0]], np.uint32)
    with pytest.raises(EmulatorError, match=r"all_to_all_v sizes: rank 0 sends 17 elements from "
                       r"offset 0 of 40, to offset 0 with room for 16"):
        run_devices(KernelOnEachCore(variable, how="all_to_all_v", n=2, rdispls=False,
                                     meta_on_sbuf=False),
                    [[np.zeros(40, np.float32), meta]] * 2, 2, 1, timeout_s=60)


TARGET = 'custom_call_target="AwsNeuronCustomNativeKernel"'


@nki.jit
def scaled_all_gather(a):
    out = nl.ndarray((2 * a.shape[0], a.shape[1]), dtype=a.dtype, buffer=nl.shared_hbm)
    mid = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(mid, nl.multiply(nl.load(a), 3.0))
    cc.all_gather([mid], [out], cc.ReplicaGroup([[0, 1], [2, 3]]), 0)
    return out


def test_kernel_collective_mixed_with_an_hlo_all_reduce_in_one_program():
    call = build.nki_call(scaled_all_gather, (1,), [TensorSpec((16, 8), "float32")])
    text = f"""HloModule m, replica_count=4
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}}
ENTRY e {{
  p = f32[16,8] parameter(0)
  s = f32[16,8] all-reduce(p), replica_groups={{{{0,2}},{{1,3}}}}, to_apply=add
  k = f32[32,8] custom-call(s), {TARGET}, backend_config="{call.config}"
  ROOT o = f32[32,8] all-reduce(k), replica_groups={{{{0,1,2,3}}}}, to_apply=add
}}"""
    exe = load_artifact(compile_module(hlo.load(text)))
    xs = _inputs(4, (16, 8), seed=15)
    outs = run_devices(exe, [[x] for x in xs], 4, 1, timeout_s=60)
    s = [xs[0] + xs[2], xs[1] + xs[3], xs[0] + xs[2], xs[1] + xs[3]]
    k = [np.concatenate([3 * s[0], 3 * s[1]]), np.concatenate([3 * s[2], 3 * s[3]])]
    for d in range(4):
        np.testing.assert_allclose(outs[d][0], k[0] + k[1] + k[0] + k[1], rtol=1e-5)


@nki.jit
def fails_on_rank_one(a, bad):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    cc.all_reduce([a], [out], cc.ReplicaGroup([[0, 1]]), nl.add)
    cc.all_reduce([out], [a if bad else out], cc.ReplicaGroup([[0, 1]]), nl.add)
    return out


class FailOnOne(KernelOnEachCore):
    def run(self, inputs):
        from emulator.collectives import current
        if current().device == 1:
            raise RuntimeError("device one broke")
        return super().run(inputs)


def test_a_failing_peer_ends_the_others_with_a_clear_error_not_a_hang():
    with pytest.raises(EmulatorError, match="device 1.*device one broke"):
        run_devices(FailOnOne(fails_on_rank_one, bad=False), [[x] for x in _inputs(2, (8, 8))],
                    2, 1, timeout_s=600)


class SkipOnTwo(KernelOnEachCore):
    def run(self, inputs):
        from emulator.collectives import current
        return inputs if current().device == 2 else super().run(inputs)


def test_a_missing_group_member_times_out_with_a_collective_error():
    with pytest.raises(CollectiveError, match=r"devices \[2\] did not arrive within 1 s"):
        run_devices(SkipOnTwo(hbm_collective, how="all_reduce", groups=[[0, 1, 2]]),
                    [[x] for x in _inputs(3, (8, 8))], 3, 1, timeout_s=1)


def test_a_rank_in_no_replica_group_is_an_error_naming_it():
    with pytest.raises(EmulatorError, match=r"rank outside the replica groups: rank 2 is in none "
                       r"of the replica groups \[\[0, 1\]\]"):
        run_devices(KernelOnEachCore(hbm_collective, how="all_reduce", groups=[[0, 1]]),
                    [[x] for x in _inputs(3, (8, 8))], 3, 1, timeout_s=60)


# --- one core (rank 0 of a world of one) ----------------------------------------------------------

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


def test_one_core_alone_is_rank_zero():
    out, who = sbuf_collectives(np.ones((4, 2), np.float32), ((0,),))
    assert who.item() == 0
    np.testing.assert_array_equal(out, np.ones((4, 4), np.float32))


@nki.jit
def bad(a, how):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    if how == "group":
        cc.all_reduce([a], [out], cc.ReplicaGroup([[0, 1]]), nl.add)
    elif how == "pairs":
        cc.collective_permute([a], [out], [(0, 1), (1, 0)])
    elif how == "ring":
        cc.collective_permute_implicit([[a]], [[out]], cc.ReplicaGroup([[0, 1]]))
    elif how == "op":
        cc.all_reduce([a], [out], ONE, nl.subtract)
    elif how == "mixed":
        cc.all_reduce([a], [nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)], ONE, nl.add)
    elif how == "uneven":
        cc.all_reduce([a], [out], cc.ReplicaGroup([[0, 1], [2]]), nl.add)
    elif how == "shape":
        cc.all_gather([a], [out], cc.ReplicaGroup([[0, 1]]), 0)
    elif how == "sbuf_a2a":
        t = nl.load(a)
        cc.all_to_all([t], [nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)], ONE, 0)
    elif how == "v":
        m = nl.ndarray((4, 1), dtype=nl.uint32, buffer=nl.shared_hbm)
        cc.all_gather_v([a], [out], ONE, m, has_rdispls=True)
    else:
        cc.all_gather([a], [out], ONE, 1)
    return out


@pytest.mark.parametrize("how, error, message", [
    ("group", KernelRuntimeError, r"collective across NeuronCores.*runs on one NeuronCore"),
    ("pairs", KernelRuntimeError, r"collective across NeuronCores"),
    ("ring", KernelRuntimeError, r"collective across NeuronCores"),
    ("op", KernelTraceError, "nl.add, nl.minimum or nl.maximum"),
    ("mixed", KernelTraceError, "all on HBM or all on SBUF"),
    ("dim", KernelTraceError, r"collective_dim 1 \(supported: \(0,\)\)"),
    ("uneven", UnsupportedAPIError, r"all_reduce is not supported.*different sizes"),
    ("shape", KernelTraceError, r"destination \[128, 8\] for source \[128, 8\]: concatenating 2"),
    ("sbuf_a2a", KernelTraceError, r"collective_dim 0 \(supported: \(\)\)"),
    ("v", UnsupportedAPIError, r"all_gather_v is not supported.*has_rdispls=True"),
])
def test_errors_name_the_rule_or_the_unsupported_form(how, error, message):
    with pytest.raises(error, match=message):
        bad(np.zeros((128, 8), np.float32), how)


def test_replica_groups_may_not_overlap():
    with pytest.raises(ValueError, match="overlap"):
        cc.ReplicaGroup([[0, 1], [1, 2]])
