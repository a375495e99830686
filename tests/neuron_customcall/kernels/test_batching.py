"""Kernels batched along a new grid axis (vmap) compute what one call per batch element computes,
and still run the grid as batch axes."""
from __future__ import annotations

import numpy as np
import pytest

from emulator.kernel_exec import run_kernel
from emulator.kernel_exec.program import prepare
from neuron_customcall import nki
from neuron_customcall.kernels.batching import batch_ir
from neuron_customcall.nki import language as nl
from tests.neuron_customcall.kernels.seed_kernels import nki_tensor_add_kernel_, scale_and_shift
from tests.neuron_customcall.nki import test_nki_kernels as k

rng = np.random.default_rng(0)
B = 3


@nki.jit
def with_scratch(x):
    """Shared and private HBM scratch, and an input written in place."""
    shared = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    private = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)
    i_p, i_f = nl.mgrid[0:x.shape[0], 0:x.shape[1]]
    t = nl.load(x[i_p, i_f])
    nl.store(shared[i_p, i_f], value=nl.exp(t))
    nl.store(private[i_p, i_f], value=nl.load(shared[i_p, i_f]) + 1.0)
    nl.store(x[i_p, i_f], value=nl.load(private[i_p, i_f]) * t)


CASES = {
    "seed add, 2-D grid": (nki_tensor_add_kernel_, (2, 2), [(256, 1024), (256, 1024)], ()),
    "two outputs, statics": (scale_and_shift, (1,), [(128, 64)], (2.0, -1.0)),
    "tiled matmul, affine loops into PSUM": (k.matmul_tiled_kernel, (1,), [(256, 128), (256, 512)], ()),
    "scan": (k.scan_kernel, (1,), [(128, 64), (128, 64)], ()),
    "masked tail tile": (k.scale_rows_kernel, (3,), [(300, 40)], ()),
    "rmsnorm": (k.rmsnorm_kernel, (1,), [(128, 64), (1, 64)], (1e-5,)),
    "scratch and in-place input": (with_scratch, (1,), [(128, 32)], ()),
}


@pytest.mark.parametrize("name", CASES)
def test_batched_kernel_equals_one_call_per_element(name):
    kernel, grid, shapes, statics = CASES[name]
    args = [rng.uniform(0.5, 1.0, (B, *s)).astype(np.float32) for s in shapes]
    ir = kernel.trace([a[0] for a in args] + list(statics), {}, grid).ir
    batched = batch_ir(ir, B)
    assert batched.grid == (*grid, B)
    program = prepare(batched)
    got = run_kernel(program, args)  # tensor parameters come first, in order, in every case
    per_element = [run_kernel(prepare(ir), [a[i] for a in args]) for i in range(B)]
    for out, ref in zip(got, zip(*per_element)):
        np.testing.assert_allclose(out, np.stack(ref), rtol=1e-6, atol=1e-6)
    single = prepare(ir)
    if single.grid_reason is None:
        assert program.grid_reason is None  # the batch axis vectorises like the grid
