"""Beta-1 (``neuronxcc.nki``) API that later neuronxcc releases added and AWS's examples of those
releases use: ``nisa.tensor_scalar_cumulative`` (``dst=`` by keyword) with
``reduce_cmd.load_reduce``, ``nisa.dma_transpose(dge_mode=)``, and an optional HBM tensor
argument tested with ``if x`` (a handle is true; an on-chip tile's values are refused).
Checked against NumPy from the reference's pseudo code."""
from __future__ import annotations

import numpy as np
import pytest

from neuron_customcall import nki
from neuron_customcall.nki import isa as nisa
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import KernelTraceError, NkiValidationError

RNG = np.random.default_rng(1313)


def _cumulative(x, imm0, imm1, op1, cmd):
    """reg = op1(x[i] + imm0, reg) along the free axis, per partition (reference pseudo code)."""
    fn = {"add": np.add, "max": np.maximum, "min": np.minimum, "mul": np.multiply}[op1]
    start = {"reset_reduce": {"add": 0.0, "max": -np.inf, "min": np.inf, "mul": 1.0}[op1],
             "load_reduce": imm1}[cmd]
    reg = np.broadcast_to(np.asarray(start, np.float32), (x.shape[0], 1))[:, 0].copy()
    out = np.empty_like(x)
    for i in range(x.shape[1]):
        reg = fn(x[:, i] + imm0[:, 0], reg)
        out[:, i] = reg
    return out


@pytest.mark.parametrize("op1, nl_op", [("add", nl.add), ("max", nl.maximum), ("min", nl.minimum),
                                        ("mul", nl.multiply)])
@pytest.mark.parametrize("cmd", ["reset_reduce", "load_reduce"])
def test_beta1_tensor_scalar_cumulative_with_tile_operands(op1, nl_op, cmd):
    x = RNG.uniform(0.5, 1.5, (64, 20)).astype(np.float32)
    imm0 = RNG.uniform(-0.5, 0.5, (64, 1)).astype(np.float32)
    imm1 = RNG.uniform(-2, 2, (64, 1)).astype(np.float32)

    @nki.jit
    def k(x, imm0, imm1):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        dst = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        got = nisa.tensor_scalar_cumulative(dst=dst, src=nl.load(x), op0=nl.add, op1=nl_op,
                                            imm0=nl.load(imm0), imm1=nl.load(imm1),
                                            reduce_cmd=getattr(nisa.reduce_cmd, cmd))
        nl.store(out, value=got)
        return out

    want = _cumulative(x, imm0, imm1, op1, cmd)
    np.testing.assert_allclose(k(x, imm0, imm1), want, rtol=1e-6)


def test_beta1_tensor_scalar_cumulative_reduce_continues_from_the_last_value():
    x = RNG.uniform(0, 1, (32, 8)).astype(np.float32)

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        dst = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(dst=dst, src=t, op0=nl.multiply, op1=nl.add, imm0=2.0)
        nisa.tensor_scalar_cumulative(dst=dst, src=t, op0=nl.multiply, op1=nl.add, imm0=2.0,
                                      reduce_cmd=nisa.reduce_cmd.reduce)
        nl.store(out, value=dst)
        return out

    first = np.cumsum(2 * x, axis=1)
    np.testing.assert_allclose(k(x), first + first[:, -1:], rtol=1e-6)


@pytest.mark.parametrize("mode", ["hwdge", "swdge", "unknown"])
def test_beta1_dma_transpose_takes_dge_mode(mode):
    a = RNG.standard_normal((16, 96)).astype(np.float16)

    @nki.jit
    def k(a):
        t = nisa.dma_transpose(a[:, :], dge_mode=getattr(nisa.dge_mode, mode))
        out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=t)
        return out

    np.testing.assert_array_equal(k(a), a.T)


def test_dma_transpose_refuses_an_unknown_dge_mode():
    @nki.jit
    def k(a):
        t = nisa.dma_transpose(a, dge_mode="fast")
        out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=t)
        return out

    with pytest.raises(NkiValidationError, match="dge_mode"):
        k(np.zeros((4, 8), np.float32))


def test_an_optional_hbm_argument_is_tested_with_if():
    x = RNG.standard_normal((8, 16)).astype(np.float32)
    b = RNG.standard_normal((8, 16)).astype(np.float32)

    @nki.jit
    def k(x, b=None):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        bias = nl.load(b) if b else None
        nl.store(out, value=t + bias if bias is not None else t)
        return out

    np.testing.assert_allclose(k(x, b), x + b)
    np.testing.assert_array_equal(k(x), x)


def test_branching_on_an_on_chip_tile_is_still_refused():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(out, value=t if t else t)
        return out

    with pytest.raises(KernelTraceError, match="data-dependent control flow"):
        k(np.ones((4, 4), np.float32))


def test_mgrid_y_is_the_second_free_axis():
    x = RNG.standard_normal((16, 3, 5)).astype(np.float32)

    @nki.jit
    def k(x):
        out = nl.ndarray((16, 5, 3), dtype=x.dtype, buffer=nl.shared_hbm)
        g = nl.mgrid[0:16, 0:3, 0:5]
        t = nl.load(x[g.p, g.x, g.y])
        nl.store(out[g.p, g.y, g.x], value=t)
        return out

    np.testing.assert_array_equal(k(x), x.transpose(0, 2, 1))
    with pytest.raises(IndexError, match=r"\.y is axis 2 of the grid, which has 2 axes"):
        nl.mgrid[0:4, 0:4].y


def test_beta1_nc_matmul_double_row_gen3():
    """[K=128, 2, M] x [128, 2, N]: the contraction runs over both the partitions and the pair
    axis (ISA reference, double_row)."""
    import ml_dtypes
    f8 = ml_dtypes.float8_e5m2
    a = RNG.integers(-3, 4, (128, 2, 4)).astype(f8)
    b = RNG.integers(-3, 4, (128, 2, 32)).astype(f8)

    @nki.jit
    def k(a, b):
        out = nl.ndarray((4, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        c = nisa.nc_matmul(nl.load(a), nl.load(b), perf_mode="double_row_gen3")
        nl.store(out, value=c)
        return out

    want = np.einsum("kli,klj->ij", a.astype(np.float32), b.astype(np.float32))
    np.testing.assert_array_equal(k(a, b), want)
