"""``nisa.topk`` (issue 13) against a NumPy reference written from the reference's text: the
source is a 16-partition snake (element e at partition e % 16, column e // 16, n elements);
each group of 16 partitions gets its K largest values ascending (bf16) and their indices e
(uint32). Ties (the reference does not say): the lower index counts as the larger, and equal
values are written lower index first (docs/nki.md). Also the stated argument rules."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from neuron_customcall.nki.isa import beta2 as nisa  # the SDK's `nki.isa` (beta 2)
from neuron_customcall import nki
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import HardwareRuleError

BF16 = ml_dtypes.bfloat16


@nki.jit
def topk_kernel(in_tensor, n, k):
    """The reference's example, the outputs stored."""
    par_dim, src_x = in_tensor.shape
    vals = nl.ndarray((par_dim, k), nl.bfloat16, buffer=nl.shared_hbm)
    idxs = nl.ndarray((par_dim, k), nl.uint32, buffer=nl.shared_hbm)
    src = nl.ndarray((par_dim, src_x), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=in_tensor)
    val_dst = nl.ndarray((par_dim, k), dtype=nl.bfloat16, buffer=nl.sbuf)
    idx_dst = nl.ndarray((par_dim, k), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.topk(val_dst=val_dst, idx_dst=idx_dst, src=src, n=n)
    nisa.dma_copy(dst=vals, src=val_dst)
    nisa.dma_copy(dst=idxs, src=idx_dst)
    return vals, idxs


def reference(x: np.ndarray, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Element by element, as the text says."""
    p = x.shape[0]
    vals = np.zeros((p, k), np.float32)
    idxs = np.zeros((p, k), np.uint32)
    for g in range(p // 16):
        snake = [float(x[g * 16 + e % 16, e // 16]) for e in range(n)]
        best = sorted(range(n), key=lambda e: (-snake[e], e))[:k]
        best.sort(key=lambda e: (snake[e], e))
        for q in range(16):
            vals[g * 16 + q] = [snake[e] for e in best]
            idxs[g * 16 + q] = best
    return vals, idxs


@pytest.mark.parametrize("parts,n,k", [(16, 42, 8), (32, 8, 8), (128, 500, 33), (16, 16, 1)])
def test_topk_matches_the_reference(parts, n, k):
    rng = np.random.default_rng(parts * n + k)
    x = rng.standard_normal((parts, -(-n // 16) + 1)).astype(BF16)  # a spare column: unused
    vals, idxs = topk_kernel(x, n, k)
    want_v, want_i = reference(x, n, k)
    np.testing.assert_array_equal(vals.astype(np.float32), want_v)
    np.testing.assert_array_equal(idxs, want_i)
    assert (np.diff(vals.astype(np.float32), axis=1) >= 0).all()


def test_ties_take_the_lower_index():
    x = np.zeros((16, 2), BF16)
    x[3, 0] = x[5, 1] = 2.0  # elements 3 and 21
    x[7, 0] = 1.0            # element 7; every other element is 0
    vals, idxs = topk_kernel(x, 32, 5)
    assert vals[0].astype(np.float32).tolist() == [0.0, 0.0, 1.0, 2.0, 2.0]
    assert idxs[0].tolist() == [0, 1, 7, 3, 21]


@pytest.mark.parametrize("shape,n,k,message", [
    ((24, 4), 42, 8, "multiple of 16 partitions"),
    ((16, 2), 42, 8, "needs src to have 3 columns"),
    ((16, 4), 7, 4, "8 <= n < 65536"),
    ((16, 4), 8, 9, "K <= n"),
])
def test_argument_rules(shape, n, k, message):
    with pytest.raises(HardwareRuleError, match=message):
        topk_kernel(np.zeros(shape, BF16), n, k)

    @nki.jit
    def float_src(x):
        src = nl.ndarray((16, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=src, src=x)
        v = nl.ndarray((16, 4), dtype=nl.bfloat16, buffer=nl.sbuf)
        i = nl.ndarray((16, 4), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.topk(v, i, src, 16)
        return x

    with pytest.raises(HardwareRuleError, match=r"src is a bfloat16 \[P, ...\] tile, got float32"):
        float_src(np.zeros((16, 4), np.float32))
