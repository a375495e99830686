"""A beta-2 ``nki.isa`` kernel (new instructions, reduce registers, dst views) as a custom-call in
JAX and torch_xla graphs: its serialised IR crosses the backend_config and runs in the compiled
artifact, against NumPy."""
from __future__ import annotations

import numpy as np
import pytest

from tests.neuron_customcall.nki.isa_beta2_kernels import first8_softmax, softmax_of_first8

X = np.random.default_rng(4).standard_normal((256, 64)).astype(np.float32)


def test_in_a_jax_graph():
    jax = pytest.importorskip("jax")
    import neuron_customcall.jax as nj
    out = nj.jit(lambda a: first8_softmax[2](a) * 2.0)(jax.numpy.asarray(X))
    np.testing.assert_allclose(np.asarray(out), 2 * softmax_of_first8(X), rtol=1e-5)


def test_in_a_torch_xla_graph():
    torch = pytest.importorskip("torch")
    torch_xla = pytest.importorskip("torch_xla")
    from neuron_customcall.torch_xla import to_cpu
    a = torch.from_numpy(X).to(torch_xla.device())
    out = to_cpu(first8_softmax[2](a) + a[:, :8] * 0)
    np.testing.assert_allclose(out.numpy(), softmax_of_first8(X), rtol=1e-5)
