"""LNC=2 launches (issue 18): a grid with ``nl.nc(2)`` (or beta 2's ``kernel[2]``) spreads its
programs over the two cores of a logical NeuronCore. A race-free kernel gives its one-core result;
the races the split creates are errors naming both instructions; ``core_barrier`` and
``sendrecv`` work between the two cores; the cost model gives the launch one core's half."""
from __future__ import annotations

import numpy as np
import pytest

from emulator.cost.kernel_ir import kernel_cost
from emulator.kernel_exec.errors import KernelRuntimeError
from emulator.kernel_exec.lnc import cores_of
from emulator.kernel_ir import serialise
from neuron_customcall import nki
from neuron_customcall.nki import TensorSpec, trace_kernel
from neuron_customcall.nki import collectives as cc
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import UnsupportedAPIError
from neuron_customcall.nki.isa import beta2 as nisa
from tests.neuron_customcall.kernels.seed_kernels import nki_tensor_add_kernel_

RNG = np.random.default_rng(18)


#: AWS's SPMD tensor-add kernel (one [128, 512] tile per program), which its multi-core tutorial
#: launches on [nl.spmd_dim(grid_x, nl.nc(2)), grid_y].
tensor_add = nki_tensor_add_kernel_


@pytest.mark.parametrize("dim, lnc", [(nl.spmd_dim(2, nl.nc(2)), (0, 1, 2)),
                                      (nl.spmd_dim(nl.nc(2), 2), (0, 2, 2)),
                                      (nl.nc(2) * 2, (0, 2, 2)), (2 * nl.nc(2), (0, 1, 2))])
def test_lnc2_grid_equals_its_one_core_run(dim, lnc):
    a = RNG.random((512, 1024)).astype(np.float16)
    b = RNG.random((512, 1024)).astype(np.float16)
    one = tensor_add[4, 2](a, b)
    two = tensor_add[dim, 2](a, b)
    np.testing.assert_array_equal(two, one)
    np.testing.assert_allclose(two, a + b, rtol=1e-3)
    ir = trace_kernel(tensor_add[dim, 2], [TensorSpec((512, 1024), "float16")] * 2).ir
    assert ir.lnc == lnc and ir.grid == (4, 2)
    # the tutorial's placement: [spmd_dim(n, nc(2)), m] puts even program_id(0) on core 0
    expect = (np.arange(4) // lnc[1]) % 2
    np.testing.assert_array_equal(cores_of(ir)[:, 0], expect)
    assert serialise.from_bytes(serialise.to_bytes(ir)).lnc == lnc


def test_lnc2_launch_costs_half_the_one_core_launch():
    specs = [TensorSpec((512, 1024), "float16")] * 2
    one = kernel_cost(trace_kernel(tensor_add[4, 2], specs).ir)
    two = kernel_cost(trace_kernel(tensor_add[nl.spmd_dim(2, nl.nc(2)), 2], specs).ir)
    assert one and set(one) == set(two)
    for engine in one:
        assert two[engine] == pytest.approx(one[engine] / 2)


def test_a_plain_grid_is_one_core_and_launches_are_told_apart():
    a = np.ones((256, 512), np.float16)
    assert trace_kernel(tensor_add[2, 1], [TensorSpec(a.shape, "float16")] * 2).ir.lnc is None
    tensor_add[2, 1](a, a)
    with pytest.raises(KernelRuntimeError, match="core race"):
        same_rows[nl.nc(2), 1](a)  # after the same grid as plain ints: not the cached launch


@nki.jit
def same_rows(a):
    """Every program stores the same rows: a write race once two cores run the programs."""
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(a[0:128, :]))
    return out


def test_two_cores_storing_the_same_elements_is_a_race():
    a = np.ones((256, 512), np.float16)
    same_rows[2, 1](a)  # one core: the existing warning only
    with pytest.raises(KernelRuntimeError, match=r"core race: element \[0, 0\] of shared tensor "
                       r"'hbm\d+': store at .* on core 0 writes it and store at .* on core 1 "
                       r"writes it, with no nki.isa.core_barrier between them"):
        same_rows[nl.nc(2), 1](a)


@nki.jit
def exchange_halves(x, barrier):
    """Beta 2, one program per core: each core writes its half of a shared tensor, then reads
    the other core's half (after a core_barrier when `barrier`)."""
    n = x.shape[0] // 2
    shared = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    me = nl.program_id(0)
    rows = me * n + nl.arange(n)[:, None]
    other = (1 - me) * n + nl.arange(n)[:, None]
    cols = nl.arange(x.shape[1])[None, :]
    t = nl.ndarray((n, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[rows, cols])
    nisa.activation(dst=t, op=nl.exp, data=t)
    nisa.dma_copy(dst=shared[rows, cols], src=t)
    if barrier:
        nisa.core_barrier(data=shared, cores=(0, 1))
    u = nl.ndarray((n, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=u, src=shared[other, cols])
    nisa.dma_copy(dst=out[rows, cols], src=u)
    return out


def test_core_barrier_orders_the_cores_and_its_absence_is_a_race():
    x = RNG.standard_normal((64, 32)).astype(np.float32)
    out = exchange_halves[2](x, True)
    e = np.exp(x)
    np.testing.assert_allclose(out, np.concatenate([e[32:], e[:32]]), rtol=1e-6)
    with pytest.raises(KernelRuntimeError, match=r"core race: .*store at .* on core \d writes "
                       r"it and load at .* on core \d reads it"):
        exchange_halves[nl.nc(2)](x, False)
    # the same barrier kernel in a beta-1 grid with nl.nc(2)
    np.testing.assert_allclose(exchange_halves[nl.nc(2)](x, True), out)


@nki.jit
def swap_tiles(x, send_to_self):
    """sendrecv in a ring of two: each core sends its tile to the other (or, wrongly, to
    itself while receiving from the other)."""
    out = nl.ndarray((2, 128, 16), dtype=x.dtype, buffer=nl.shared_hbm)
    me = nl.program_id(0)
    t = nl.ndarray((128, 16), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[me])
    r = nl.ndarray((128, 16), dtype=x.dtype, buffer=nl.sbuf)
    nisa.sendrecv(src=t, dst=r, send_to_rank=me if send_to_self else (me + 1) % 2,
                  recv_from_rank=(me + 1) % 2, pipe_id=0)
    nisa.dma_copy(dst=out[me], src=r)
    return out


def test_sendrecv_between_the_two_cores():
    x = RNG.standard_normal((2, 128, 16)).astype(np.float32)
    np.testing.assert_array_equal(swap_tiles[2](x, False), x[::-1])


def test_sendrecv_whose_peer_sends_elsewhere_is_an_error():
    with pytest.raises(KernelRuntimeError, match="sendrecv pairing: core 0 receives from core 1, "
                       "which sends to core 1"):
        swap_tiles[2](np.zeros((2, 128, 16), np.float32), True)


def test_barrier_kernels_run_one_program_per_core():
    with pytest.raises(KernelRuntimeError, match=r"each core runs one program"):
        exchange_halves[nl.spmd_dim(nl.nc(2), 2)](np.zeros((64, 32), np.float32), True)


def test_more_than_two_cores_is_an_error():
    with pytest.raises(ValueError, match="1 or 2 physical cores"):
        tensor_add[nl.spmd_dim(2, nl.nc(4)), 2]


@nki.jit
def collective_in_lnc(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    cc.all_reduce([a], [out], cc.ReplicaGroup([[0]]), nl.add)
    return out


def test_collectives_inside_an_lnc_launch_are_refused_by_name():
    with pytest.raises(UnsupportedAPIError, match="all_reduce is not supported.*LNC=2"):
        collective_in_lnc[nl.nc(2)](np.zeros((4, 4), np.float32))


# -- the platform option (emulator/platforms.py): trn2's LNC decides what a device's launch spans ---
@pytest.mark.parametrize("target, lnc", [("", ""), ("trn2", ""), ("trn2", "2")])
def test_lnc2_launches_run_where_a_device_has_two_cores(monkeypatch, target, lnc):
    """trn1 keeps its chip's two cores for nl.nc(2); a trn2 device is LNC=2 by default."""
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", target)
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", lnc)
    a = RNG.random((512, 1024)).astype(np.float16)
    np.testing.assert_array_equal(tensor_add[nl.spmd_dim(2, nl.nc(2)), 2](a, a), tensor_add[4, 2](a, a))


def test_an_lnc2_launch_on_an_lnc1_trn2_device_is_refused(monkeypatch):
    """NKI: the launch's LNC must match NEURON_LOGICAL_NC_CONFIG, else a runtime error."""
    a = RNG.random((512, 1024)).astype(np.float16)
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2")
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "1")
    with pytest.raises(KernelRuntimeError, match="over 2 physical NeuronCores .* NC_v3 device of trn2 .*LNC=1.* "
                                                 "has 1; set NEURON_LOGICAL_NC_CONFIG=2"):
        tensor_add[nl.spmd_dim(2, nl.nc(2)), 2](a, a)
    np.testing.assert_array_equal(tensor_add[4, 2](a, a), a + a)  # one core per program: fine
