"""One emulated NeuronCore (LNC=1): ``core_barrier`` over this core alone and ``sendrecv`` with
rank 0 on both sides complete at once (a copy); between two cores they need an LNC=2 launch. Also
``dma_compute`` (the DMA engines' fp32 sum) and virtual registers."""
from __future__ import annotations

import numpy as np
import pytest

from neuron_customcall import nki
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import KernelTraceError, UnsupportedAPIError
from neuron_customcall.nki.isa import beta2 as nisa

RNG = np.random.default_rng(3)


def _sb(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)


def test_single_core_barrier_and_sendrecv():
    x = RNG.standard_normal((16, 8)).astype(np.float32)

    @nki.jit
    def k(x):
        out = nl.ndarray((16, 8), nl.float32, buffer=nl.shared_hbm)
        t, d = nl.load(x), _sb((16, 8))
        nisa.sendrecv(t, d, send_to_rank=0, recv_from_rank=0, pipe_id=0)
        nisa.dma_copy(out, d)
        nisa.core_barrier(out, (0,))
        return out

    np.testing.assert_array_equal(k(x), x)


@pytest.mark.parametrize("call", ["barrier", "sendrecv"])
def test_two_cores_need_a_launch_on_two_cores(call):
    """core_barrier / sendrecv between cores 0 and 1 in a launch on one core (grid [4], no
    nl.nc(2)): an error naming the launch (LNC=2 launches: test_nki_lnc.py)."""
    @nki.jit
    def k(x):
        out = nl.ndarray((16, 8), nl.float32, buffer=nl.shared_hbm)
        t, d = nl.load(x), _sb((16, 8))
        if call == "barrier":
            nisa.core_barrier(out, (0, 1))
        else:
            nisa.sendrecv(t, d, send_to_rank=1, recv_from_rank=1, pipe_id=0)
        nl.store(out, d)
        return out

    with pytest.raises(KernelTraceError, match=r"needs a launch on two cores \(kernel\[2\]"):
        k[4](np.zeros((16, 8), np.float32))


@pytest.mark.parametrize("out_dtype", [nl.float32, nl.bfloat16])
def test_dma_compute_sums_in_fp32(out_dtype):
    a, b, c = (RNG.standard_normal((32, 16)).astype(np.float32) for _ in range(3))

    @nki.jit
    def k(a, b, c):
        out = nl.ndarray((32, 16), out_dtype, buffer=nl.shared_hbm)
        tb = _sb((32, 16))
        nisa.dma_copy(tb, b)
        nisa.dma_compute(out, [a, tb, c], nl.add)
        return out

    want = (a + b + c).astype(out_dtype)
    np.testing.assert_array_equal(k(a, b, c), want)


def test_registers_move_values_and_refuse_python_control_flow():
    @nki.jit
    def k(x):
        out = nl.ndarray((1, 1), nl.int32, buffer=nl.shared_hbm)
        reg = nisa.register_alloc(5)
        other = nisa.register_alloc()
        nisa.register_load(other, x)
        nisa.register_move(reg, other)
        nisa.register_store(out, reg)
        return out

    assert k(np.array([[42.0]], np.float32)).tolist() == [[42]]

    @nki.jit
    def bad(x):
        reg = nisa.register_alloc(1)
        if reg:  # only `while reg:` is a loop (test_nki_dynamic_loops.py)
            nisa.register_move(reg, 0)
        return x

    with pytest.raises(KernelTraceError, match="data-dependent control flow"):
        bad(np.zeros((1, 1), np.float32))
