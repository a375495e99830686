"""The executor binds some results without a copy (a ``tensor_copy`` of a slice views its
source's array). Such a view must keep its value when the tile it views is later reused in
place (a dead tile's array recycled as another result, an in-place partial write): AWS's fused
Mamba v3 carried a scan's last column this way and got wrong sums. Against NumPy."""
from __future__ import annotations

import numpy as np

from neuron_customcall import nki
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.isa import beta2 as nisa


@nki.jit
def chained_scans(a, b, states: int):
    """Per state, a scan over two halves of the row (the first half's last value starts the
    second), summed over the states."""
    P, N = a.shape
    h = N // 2
    out = nl.ndarray((P, N), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((P, N), dtype=nl.float32)
    a_t = nl.ndarray((P, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_t, src=a)
    b_t = nl.ndarray((P, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=b_t, src=b)
    for _ in nl.static_range(states):
        init = nl.zeros((P, 1), dtype=nl.float32)
        for j in nl.static_range(2):
            res = nl.ndarray((P, h), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor_scan(dst=res, data0=a_t[:, j * h:(j + 1) * h],
                                    data1=b_t[:, j * h:(j + 1) * h], initial=init,
                                    op0=nl.multiply, op1=nl.add)
            nisa.tensor_copy(dst=init, src=res[:, h - 1:h])  # a view of res's last column
            nisa.tensor_tensor(dst=acc[:, j * h:(j + 1) * h], data1=acc[:, j * h:(j + 1) * h],
                               data2=res, op=nl.add)  # res's last read: its array is reusable
    nisa.dma_copy(dst=out, src=acc)
    return out


def test_a_view_bound_as_a_tile_survives_its_sources_reuse():
    rng = np.random.default_rng(5)
    a = rng.uniform(0.2, 0.9, (16, 8)).astype(np.float32)
    b = rng.uniform(-1, 1, (16, 8)).astype(np.float32)
    h = np.zeros(16, np.float32)
    scan = np.zeros_like(a)
    for t in range(8):
        h = a[:, t] * h + b[:, t]
        scan[:, t] = h
    np.testing.assert_allclose(chained_scans(a, b, 3), 3 * scan, rtol=1e-5)
