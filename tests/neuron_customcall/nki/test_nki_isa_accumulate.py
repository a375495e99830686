"""Instructions that also reduce into an engine's reduce registers (AWS ISA reference):
``activation`` with ``reduce_op``/``reduce_res``/``reduce_cmd`` and ``activation_reduce`` (ScalarE),
``tensor_scalar_reduce``, ``select_reduce``, ``exponential`` and ``range_select`` (VectorE's
registers, shared between them). Checked against the reference's pseudo code in NumPy, in both
generations, including a running reduction carried across the iterations of a loop."""
from __future__ import annotations

import numpy as np
import pytest

from neuron_customcall import nki
from neuron_customcall.nki import isa as nisa1
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import NkiValidationError
from neuron_customcall.nki.isa import beta2 as nisa

RNG = np.random.default_rng(13)


def _sb(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)


@pytest.mark.parametrize("out_dtype", [nl.float32, nl.bfloat16])
def test_activation_reduce_cmds_carry_a_running_sum_across_a_loop(out_dtype):
    """reset_reduce on the first tile, reduce on the others: reduce_res holds the sum of every
    activated tile (of the fp32 values, whatever dst's dtype)."""
    x = RNG.standard_normal((128, 4, 32)).astype(np.float32)

    @nki.jit
    def k(x):
        out = nl.ndarray((128, 4, 32), out_dtype, buffer=nl.shared_hbm)
        sums = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
        res = _sb((128, 1))
        t, d = _sb((128, 32)), _sb((128, 32), out_dtype)
        nisa.dma_copy(t, x[:, 0, :])
        nisa.activation(d, nl.exp, t, scale=0.5, reduce_op=nl.add,
                        reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.dma_copy(out[:, 0, :], d)
        for j in nl.sequential_range(1, 4):
            t, d = _sb((128, 32)), _sb((128, 32), out_dtype)
            nisa.dma_copy(t, x[:, j, :])
            nisa.activation(d, nl.exp, t, scale=0.5, reduce_op=nl.add, reduce_res=res,
                            reduce_cmd=nisa.reduce_cmd.reduce)
            nisa.dma_copy(out[:, j, :], d)
        nisa.dma_copy(sums, res)
        return out, sums

    out, sums = k(x)
    e = np.exp(x * 0.5)
    np.testing.assert_allclose(out.astype(np.float32), e.astype(out_dtype).astype(np.float32),
                               rtol=1e-6)
    np.testing.assert_allclose(sums[:, 0], e.sum(axis=(1, 2)), rtol=1e-5)


def test_activation_reduce_both_generations_and_reset():
    x = RNG.standard_normal((64, 48)).astype(np.float32)

    @nki.jit
    def k(x):
        out = nl.ndarray((3, 64, 1), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        r1, r2, r3 = _sb((64, 1)), _sb((64, 1)), _sb((64, 1))
        y = nisa1.activation_reduce(nl.square, t, reduce_op=nl.add, reduce_res=r1, bias=None,
                                    scale=1.0)
        d = _sb((64, 48))
        nisa.activation_reduce(d, nl.tanh, t, nl.add, r2)
        nisa.activation(d, nl.tanh, t, reduce_res=r3, reduce_cmd=nisa.reduce_cmd.reset)
        for j, r in enumerate((r1, r2, r3)):
            nl.store(out[j], r)
        del y
        return out

    got = k(x)
    np.testing.assert_allclose(got[0, :, 0], (x * x).sum(1), rtol=1e-5)
    np.testing.assert_allclose(got[1, :, 0], np.tanh(x).sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[2], 0.0)


def test_activation_reduce_op_must_be_add():
    @nki.jit
    def k(x):
        out = nl.ndarray((8, 1), nl.float32, buffer=nl.shared_hbm)
        r = _sb((8, 1))
        nisa1.activation(nl.exp, nl.load(x), reduce_op=nl.maximum, reduce_res=r,
                         reduce_cmd=nisa1.reduce_cmd.reset_reduce)
        nl.store(out, r)
        return out

    with pytest.raises(NkiValidationError, match="reduce_op must be nl.add"):
        k(np.zeros((8, 8), np.float32))


@pytest.mark.parametrize("op, np_red", [(nl.add, np.sum), (nl.maximum, np.max),
                                        (nl.minimum, np.min)])
def test_tensor_scalar_reduce_and_load_reduce(op, np_red):
    x = RNG.standard_normal((32, 20)).astype(np.float32)
    init = RNG.standard_normal((32, 1)).astype(np.float32)

    @nki.jit
    def k(x, init):
        out = nl.ndarray((32, 20), nl.float32, buffer=nl.shared_hbm)
        red = nl.ndarray((3, 32, 1), nl.float32, buffer=nl.shared_hbm)
        t, i0 = nl.load(x), nl.load(init)
        d = _sb((32, 20))
        r1, r2, r3 = _sb((32, 1)), _sb((32, 1)), _sb((32, 1))
        nisa.tensor_scalar_reduce(d, t, nl.multiply, 2.0, op, reduce_res=r1)
        nisa.tensor_scalar_reduce(d, t, nl.multiply, 2.0, op, reduce_res=r2,
                                  reduce_cmd=nisa.reduce_cmd.load_reduce, reduce_init=i0,
                                  reduce_res_negate=True)
        b1 = nisa1.tensor_scalar_reduce(data=t, op0=nl.multiply, operand0=2.0, reduce_op=op,
                                        reduce_res=r3)
        nl.store(out, b1)
        for j, r in enumerate((r1, r2, r3)):
            nl.store(red[j], r)
        return out, red

    out, red = k(x, init)
    y = x * 2.0
    np.testing.assert_array_equal(out, y)
    np.testing.assert_allclose(red[0, :, 0], np_red(y, 1), rtol=1e-5, atol=1e-6)
    pair = np.stack([init[:, 0], np_red(y, 1)], 1)
    np.testing.assert_allclose(red[1, :, 0], -np_red(pair, 1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(red[2, :, 0], np_red(y, 1), rtol=1e-5, atol=1e-6)


def test_select_reduce_with_tile_and_scalar_on_false():
    x = RNG.standard_normal((16, 30)).astype(np.float32)
    pred = (RNG.uniform(size=(16, 30)) > 0.5).astype(np.uint8)
    fill = RNG.standard_normal((16, 1)).astype(np.float32)

    @nki.jit
    def k(x, pred, fill):
        out = nl.ndarray((2, 16, 30), nl.float32, buffer=nl.shared_hbm)
        red = nl.ndarray((2, 16, 1), nl.float32, buffer=nl.shared_hbm)
        t, p, f = nl.load(x), nl.load(pred), nl.load(fill)
        d1, d2 = _sb((16, 30)), _sb((16, 30))
        r1, r2 = _sb((16, 1)), _sb((16, 1))
        nisa.select_reduce(d1, p, t, f, reduce_res=r1, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa1.select_reduce(dst=d2, predicate=p, on_true=t, on_false=-5.0, reduce_res=r2,
                            reduce_cmd=nisa1.reduce_cmd.reset_reduce, reverse_pred=True)
        for j, (d, r) in enumerate(((d1, r1), (d2, r2))):
            nl.store(out[j], d)
            nl.store(red[j], r)
        return out, red

    out, red = k(x, pred, fill)
    want0 = np.where(pred != 0, x, fill)
    want1 = np.where(pred == 0, x, np.float32(-5.0))
    np.testing.assert_array_equal(out[0], want0)
    np.testing.assert_array_equal(out[1], want1)
    np.testing.assert_array_equal(red[0, :, 0], want0.max(1))
    np.testing.assert_array_equal(red[1, :, 0], want1.max(1))


def test_exponential_running_sum_over_tiles_is_a_softmax_denominator():
    x = RNG.standard_normal((128, 3, 64)).astype(np.float32)
    m = x.max(axis=(1, 2), keepdims=False)[:, None]

    @nki.jit
    def k(x, m):
        out = nl.ndarray((128, 3, 64), nl.float32, buffer=nl.shared_hbm)
        total = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
        mx = nl.load(m)
        s = _sb((128, 1))
        nisa.exponential(s, mx, max_value=mx, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        for j in nl.affine_range(3):  # the registers make the iterations run in order
            t, e = _sb((128, 64)), _sb((128, 64))
            nisa.dma_copy(t, x[:, j, :])
            nisa.exponential(e, t, max_value=mx, reduce_res=s, reduce_cmd=nisa.reduce_cmd.reduce)
            nisa.dma_copy(out[:, j, :], e)
        nisa.dma_copy(total, s)
        return out, total

    out, total = k(x, m)
    e = np.exp(x - m[:, :, None])
    np.testing.assert_allclose(out, e, rtol=1e-6)
    np.testing.assert_allclose(total[:, 0], 1.0 + e.sum(axis=(1, 2)), rtol=1e-5)


def test_range_select_masks_by_free_index_and_reduces_max():
    x = RNG.standard_normal((32, 40)).astype(np.float32)
    lo = RNG.integers(0, 20, (32, 1)).astype(np.float32)
    hi = lo + RNG.integers(1, 20, (32, 1)).astype(np.float32)

    @nki.jit
    def k(x, lo, hi):
        out = nl.ndarray((32, 40), nl.float32, buffer=nl.shared_hbm)
        red = nl.ndarray((32, 1), nl.float32, buffer=nl.shared_hbm)
        d, r = _sb((32, 40)), _sb((32, 1))
        nisa.range_select(d, nl.load(x), nl.greater_equal, nl.less, nl.load(lo), nl.load(hi),
                          reduce_res=r, range_start=2)
        nisa.dma_copy(out, d)
        nisa.dma_copy(red, r)
        return out, red

    out, red = k(x, lo, hi)
    idx = 2 + np.arange(40)[None, :]
    keep = (idx >= lo) & (idx < hi)
    want = np.where(keep, x, np.finfo(np.float32).min)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(red[:, 0], want.max(1))


@pytest.mark.parametrize("op1, cmd", [(nl.add, "reset_reduce"), (nl.subtract, "reset_reduce"),
                                      (nl.maximum, "load_reduce"), (nl.multiply, "reduce")])
def test_tensor_scalar_cumulative(op1, cmd):
    x = RNG.uniform(0.5, 1.5, (16, 24)).astype(np.float32)
    fns = {nl.add: np.add, nl.subtract: np.subtract, nl.maximum: np.maximum,
           nl.multiply: np.multiply}

    @nki.jit
    def k(x):
        out = nl.ndarray((16, 24), nl.float32, buffer=nl.shared_hbm)
        t, d = nl.load(x), _sb((16, 24))
        if cmd == "reduce":  # an earlier instruction leaves 1 * 2.0 in the registers
            seed, first = _sb((16, 1)), _sb((16, 1))
            nisa.memset(seed, 1.0)
            nisa.tensor_scalar_cumulative(first, seed, nl.multiply, nl.multiply, 2.0,
                                          reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.tensor_scalar_cumulative(d, t, nl.add, op1, 0.25, imm1=3.0,
                                      reduce_cmd=getattr(nisa.reduce_cmd, cmd))
        nisa.dma_copy(out, d)
        return out

    y = x + np.float32(0.25)
    reg = {"reset_reduce": {nl.add: 0.0, nl.subtract: 0.0}.get(op1), "load_reduce": 3.0,
           "reduce": 2.0}[cmd]
    reg = np.full(16, reg, np.float32)
    want = np.empty_like(x)
    for i in range(24):
        reg = fns[op1](y[:, i], reg)   # op1(op0(src[i], imm0), reg)
        want[:, i] = reg
    np.testing.assert_allclose(k(x), want, rtol=1e-5)


def test_activate2_stages_and_abs_max_reduction():
    x = RNG.standard_normal((32, 20)).astype(np.float32)

    @nki.jit
    def k(x):
        out = nl.ndarray((2, 32, 20), nl.float32, buffer=nl.shared_hbm)
        red = nl.ndarray((32, 1), nl.float32, buffer=nl.shared_hbm)
        t, d, e, r = nl.load(x), _sb((32, 20)), _sb((32, 20)), _sb((32, 1))
        nisa.activate2(d, nl.tanh, t, 2.0, 0.5, nl.multiply, nl.subtract, reverse1=True)
        nisa.activate2(e, nl.exp, t, 1.5, 0.0, nl.subtract, "bypass", reduce_op="abs_max",
                       reduce_res=r, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.dma_copy(out[0], d)
        nisa.dma_copy(out[1], e)
        nisa.dma_copy(red, r)
        return out, red

    out, red = k(x)
    np.testing.assert_allclose(out[0], np.tanh(0.5 - x * 2.0), rtol=1e-5, atol=1e-6)
    e = np.exp(x - 1.5)
    np.testing.assert_allclose(out[1], e, rtol=1e-6)
    np.testing.assert_allclose(red[:, 0], np.abs(e).max(1), rtol=1e-6)


def test_activate2_refuses_other_stage_pairs():
    @nki.jit
    def k(x):
        d = _sb((4, 4))
        nisa.activate2(d, nl.exp, nl.load(x), 1.0, 1.0, nl.add, nl.multiply)
        return x

    with pytest.raises(NkiValidationError, match=r"\(op0, op1\) is one of"):
        k(np.zeros((4, 4), np.float32))


def _prelu(v, slope):
    """PReLU as the activation table defines it: v where v >= 0, else slope * v."""
    return np.where(v >= 0, v, slope * v)


@pytest.mark.parametrize("vector", [False, True])
def test_activate2_prelu_takes_its_negative_slope_from_relu_param(vector):
    """nl.prelu's slope for negative inputs is relu_param, a scalar or a [P, 1] vector (one
    slope per partition), applied after the tensor-scalar stage; the result is rounded once
    into a bf16 dst, and an abs_max reduction sees the activated fp32 values."""
    x = RNG.standard_normal((32, 24)).astype(np.float32)
    slopes = RNG.uniform(0.05, 0.5, (32, 1)).astype(np.float32)

    @nki.jit
    def k(x, s):
        out = nl.ndarray((32, 24), nl.float32, buffer=nl.shared_hbm)
        low = nl.ndarray((32, 24), nl.bfloat16, buffer=nl.shared_hbm)
        red = nl.ndarray((32, 1), nl.float32, buffer=nl.shared_hbm)
        t, d, b, r = nl.load(x), _sb((32, 24)), _sb((32, 24), nl.bfloat16), _sb((32, 1))
        slope = nl.load(s) if vector else 0.25
        nisa.activate2(d, nl.prelu, t, 2.0, 0.5, nl.multiply, nl.subtract, relu_param=slope,
                       reduce_op="abs_max", reduce_res=r, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.activate2(b, nl.prelu, t, 0.0, 0.0, nl.bypass, nl.bypass, relu_param=slope)
        nisa.dma_copy(out, d)
        nisa.dma_copy(low, b)
        nisa.dma_copy(red, r)
        return out, low, red

    out, low, red = k(x, slopes)
    slope = slopes if vector else np.float32(0.25)
    want = _prelu(x * 2.0 - 0.5, slope)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(red[:, 0], np.abs(want).max(1), rtol=1e-6)
    np.testing.assert_array_equal(low.astype(np.float32),
                                  _prelu(x, slope).astype(nl.bfloat16).astype(np.float32))


def test_prelu_relu_param_negative_slope_and_a_non_parameterised_op():
    """A negative slope flips negative inputs; relu_param is passed to every op by the
    reference's pseudo code and only PReLU reads it (tanh ignores it); nisa.activation (either
    generation), which has no relu_param, runs PReLU with the default slope 0.0 (ReLU)."""
    x = RNG.standard_normal((16, 8)).astype(np.float32)

    @nki.jit
    def k(x):
        out = nl.ndarray((4, 16, 8), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        c, d, e = _sb((16, 8)), _sb((16, 8)), _sb((16, 8))
        nisa.activate2(c, nl.prelu, t, 1.0, 0.0, nl.multiply, nl.bypass, relu_param=-0.5)
        nisa.dma_copy(out[0], c)
        nl.store(out[3], nisa1.activation(op=nl.prelu, data=t))
        nisa.activate2(d, nl.tanh, t, 0.0, 0.0, nl.bypass, nl.bypass, relu_param=3.0)
        nisa.activation(e, nl.prelu, t)
        nisa.dma_copy(out[1], d)
        nisa.dma_copy(out[2], e)
        return out

    out = k(x)
    np.testing.assert_allclose(out[0], _prelu(x, -0.5), rtol=1e-6)
    np.testing.assert_allclose(out[1], np.tanh(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out[2], np.maximum(x, 0))
    np.testing.assert_array_equal(out[3], np.maximum(x, 0))


def test_activate2_relu_param_vector_must_be_one_per_partition():
    @nki.jit
    def k(x):
        t = nl.load(x)
        d = _sb((16, 8))
        nisa.activate2(d, nl.prelu, t, 0.0, 0.0, nl.bypass, nl.bypass, relu_param=t)
        return x

    with pytest.raises(NkiValidationError, match=r"relu_param must be a \[16, 1\] tile"):
        k(np.zeros((16, 8), np.float32))
