"""A beta-2 kernel (``nki.isa`` writing into ``dst``) for the framework tests: a per-row softmax
over the values found by ``nc_find_index8`` and gathered by ``nc_n_gather``, normalised with the
ScalarE reduce registers. NumPy reference: ``softmax_of_first8``."""
from __future__ import annotations

import numpy as np

from neuron_customcall import nki
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.isa import beta2 as nisa


@nki.jit
def first8_softmax(x):
    out = nl.ndarray((x.shape[0], 8), nl.float32, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    t = nl.ndarray((128, x.shape[1]), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(t, x[i * 128:(i + 1) * 128, :])
    idx = nl.ndarray((128, 8), nl.uint32, buffer=nl.sbuf)
    nisa.nc_find_index8(idx, t, t[:, 0:8])
    v = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.nc_n_gather(v, t, idx)
    e = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    total = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.activation(e, nl.exp, v, reduce_op=nl.add, reduce_res=total,
                    reduce_cmd=nisa.reduce_cmd.reset_reduce)
    nisa.tensor_scalar(e, e, nl.divide, total)
    nisa.dma_copy(out[i * 128:(i + 1) * 128, :], e)
    return out


def softmax_of_first8(x: np.ndarray) -> np.ndarray:
    e = np.exp(x[:, :8].astype(np.float64))
    return (e / e.sum(1, keepdims=True)).astype(np.float32)
