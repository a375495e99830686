"""``nisa.max8`` (AWS ISA reference): the 8 largest values of each partition in descending order,
compared in fp32, any source rank up to 5, 8 to 16384 elements per partition; the result is
[P, 8] in the source's dtype unless ``dtype=`` says otherwise. Checked against NumPy."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from emulator.cost.kernel_ir import kernel_cost
from emulator.kernel_ir import from_bytes, to_bytes
from neuron_customcall import nki
from neuron_customcall.nki import isa as nisa
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import HardwareRuleError


def _top8(x: np.ndarray) -> np.ndarray:
    flat = x.reshape(x.shape[0], -1).astype(np.float32)
    return -np.sort(-flat, axis=1)[:, :8]


@nki.jit
def max8_rows(x):
    """Each 128-row block of ``x`` on its own program, in blocks of 128 rows per loop step."""
    p, f = 128, x.shape[1]
    out = nl.ndarray((x.shape[0], 8), x.dtype, buffer=nl.shared_hbm)
    blocks = x.shape[0] // (p * nl.num_programs(0))
    for j in nl.affine_range(blocks):
        row = (nl.program_id(0) * blocks + j) * p
        i_p, i_f = nl.mgrid[0:p, 0:f]
        t = nl.load(x[row + i_p, i_f])
        i_p8, i_8 = nl.mgrid[0:p, 0:8]
        nl.store(out[row + i_p8, i_8], nisa.max8(src=t))
    return out


@pytest.mark.parametrize("grid, rows, cols", [(1, 128, 8), (2, 512, 100), (4, 512, 2048)])
def test_max8_against_numpy(grid, rows, cols):
    rng = np.random.default_rng(rows + cols)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    np.testing.assert_array_equal(max8_rows[grid](x), _top8(x))


def test_max8_keeps_duplicates_and_reads_every_free_axis():
    x = np.zeros((16, 2, 3, 4), np.float32)
    x[:, 1, 2, 3] = 5.0
    x[:, 0, 0, 0] = 5.0
    x[3, 1, 1, 1] = -1.0

    @nki.jit
    def k(a):
        out = nl.ndarray((16, 8), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.max8(src=nl.load(a)))
        return out

    got = k(x)
    np.testing.assert_array_equal(got, _top8(x))
    assert got[0, :3].tolist() == [5.0, 5.0, 0.0]


def test_max8_dtype_follows_the_source_or_the_argument():
    x = np.random.default_rng(0).standard_normal((32, 64)).astype(ml_dtypes.bfloat16)

    @nki.jit
    def k(a):
        t = nl.load(a)
        same = nl.ndarray((32, 8), a.dtype, buffer=nl.shared_hbm)
        wide = nl.ndarray((32, 8), nl.float32, buffer=nl.shared_hbm)
        nl.store(same, nisa.max8(src=t))
        nl.store(wide, nisa.max8(src=t, dtype=nl.float32))
        return same, wide

    same, wide = k(x)
    assert same.dtype == x.dtype and wide.dtype == np.float32
    np.testing.assert_array_equal(wide, _top8(x))
    np.testing.assert_array_equal(same.astype(np.float32), _top8(x))


@pytest.mark.parametrize("cols", [4, 16385])
def test_max8_free_size_rule(cols):
    @nki.jit
    def k(a):
        out = nl.ndarray((2, 8), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.max8(src=nl.load(a)))
        return out

    with pytest.raises(HardwareRuleError, match="max8 free size") as e:
        k(np.zeros((2, cols), np.float32))
    assert f"{cols} elements per partition" in str(e.value)


def test_max8_round_trips_and_costs_on_the_vector_engine():
    x = np.random.default_rng(1).standard_normal((256, 64)).astype(np.float32)
    traced = nki.trace_kernel(max8_rows.func, [nki.TensorSpec(x.shape, "float32")], grid=(2,))
    again = from_bytes(to_bytes(traced.ir))
    assert [i.op for i in again.instructions()].count("max8") == 1
    assert "vector" in kernel_cost(again)


def test_max8_source_rank_rule():
    @nki.jit
    def k(a):
        out = nl.ndarray((2, 8), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.max8(src=nl.load(a)))
        return out

    with pytest.raises(HardwareRuleError, match="max8 source rank"):
        k(np.zeros((2, 2, 2, 2, 2, 2), np.float32))
    np.testing.assert_array_equal(k(np.arange(32, dtype=np.float32).reshape(2, 2, 2, 2, 2)),
                                  [[15, 14, 13, 12, 11, 10, 9, 8], [31, 30, 29, 28, 27, 26, 25, 24]])
