"""Kernels several NKI tests share."""

from __future__ import annotations

from neuron_customcall import nki
from neuron_customcall.nki import language as nl


@nki.jit
def tiled_add(a, b):
    """``a + b`` for [128 * g, n] tensors on a grid of g programs, 128 rows each."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0) * 128 + nl.arange(128)[:, None]
    j = nl.arange(a.shape[1])[None, :]
    nl.store(out[i, j], value=nl.load(a[i, j]) + nl.load(b[i, j]))
    return out
