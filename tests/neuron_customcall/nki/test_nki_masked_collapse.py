"""A masked write whose mask depends on a loop the executor runs as one batch (the destination
does not depend on the loop variable): only iterations whose mask holds may write. Accumulations
skip the others; plain writes leave the last iteration whose mask holds, as sequential execution
does. (Before: every iteration was summed, or the last one's value taken, then masked.)"""
from __future__ import annotations

import numpy as np

from neuron_customcall import nki
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.isa import beta2 as nisa

X = np.random.default_rng(5).standard_normal((4, 32, 16)).astype(np.float32)


def test_plain_store_keeps_the_last_iteration_whose_mask_holds():
    @nki.jit
    def k(x):
        out = nl.ndarray((32, 16), nl.float32, buffer=nl.shared_hbm)
        for j in nl.affine_range(4):
            nl.store(out, nl.load(x[j]), mask=(j < 2))
        return out

    np.testing.assert_array_equal(k(X), X[1])


def test_accumulation_skips_iterations_whose_mask_fails():
    @nki.jit
    def k(x):
        out = nl.ndarray((32, 16), nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((32, 16), nl.float32, buffer=nl.psum)
        for j in nl.affine_range(4):
            t = nl.ndarray((32, 16), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(t, x[j])
            ident = nl.ndarray((32, 32), nl.float32, buffer=nl.sbuf)
            nisa.memset(ident, 0.0)
            nisa.affine_select(ident, [[-1, 32]], 1, ident, 1.0, cmp_op=nl.not_equal)
            nisa.nc_matmul(acc, ident, t, accumulate=(j > 1))
        r = nl.ndarray((32, 16), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(r, acc)
        nisa.dma_copy(out, r)
        return out

    np.testing.assert_allclose(k(X), X[1] + X[2] + X[3], rtol=1e-5, atol=1e-6)
