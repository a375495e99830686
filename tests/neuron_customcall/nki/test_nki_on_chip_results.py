"""A kernel that returns an SBUF or PSUM tile (AWS's range_select example does): the NKI
simulator's rule is that "on return, NkiTensor results are converted back to NumPy arrays", so
NumPy launches get the tile's values at the return. In a framework graph a kernel's outputs
must be HBM tensors (the memory-hierarchy guide): refused naming the rule. A grid of several
programs has one tile per program: refused."""
from __future__ import annotations

import numpy as np
import pytest

from neuron_customcall import nki
from neuron_customcall.nki import isa as nisa
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import KernelTraceError, NKIError

RNG = np.random.default_rng(77)


@nki.jit
def exp_and_rowmax(x):
    """(exp(x) as an SBUF tile, its row maxima in an HBM tensor)."""
    t = nl.exp(nl.load(x))
    m = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(m, value=nl.max(t, axis=1, keepdims=True))
    t = t * 2.0  # the value at the return is what comes back
    return t, m


def test_an_sbuf_result_comes_back_with_its_value_at_the_return():
    x = RNG.standard_normal((64, 40)).astype(np.float32)
    t, m = exp_and_rowmax(x)
    np.testing.assert_allclose(t, 2 * np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(m[:, 0], np.exp(x).max(1), rtol=1e-6)
    t2, _ = nki.simulate_kernel(exp_and_rowmax, x)
    np.testing.assert_array_equal(t, t2)


def test_a_psum_result_and_a_view_of_an_sbuf_tile():
    a = RNG.standard_normal((32, 48)).astype(np.float32)
    b = RNG.standard_normal((32, 24)).astype(np.float32)

    @nki.jit
    def k(a, b):
        p = nisa.nc_matmul(nl.load(a), nl.load(b))  # a.T @ b in PSUM
        s = nl.load(b)
        return p, s[:, 8:16]

    p, s = k(a, b)
    assert p.shape == (48, 24) and s.shape == (32, 8)
    np.testing.assert_allclose(p, a.T @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(s, b[:, 8:16])


def test_an_on_chip_result_of_several_programs_is_refused():
    @nki.jit
    def k(x):
        return nl.load(x[nl.program_id(0) * 8 + nl.arange(8)[:, None], nl.arange(4)[None, :]])

    with pytest.raises(KernelTraceError, match="invalid kernel result.*grid of 2 programs"):
        k[2](np.zeros((16, 4), np.float32))


def test_a_framework_graph_refuses_an_on_chip_result():
    jax = pytest.importorskip("jax")
    import neuron_customcall.jax as nj
    x = RNG.standard_normal((16, 8)).astype(np.float32)
    with pytest.raises(NKIError, match="outputs must be HBM tensors"):
        nj.jit(lambda a: exp_and_rowmax(a)[1] + 1.0)(jax.numpy.asarray(x))
