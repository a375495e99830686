"""AWS's NKI tutorial kernels (our own versions, tutorial_kernels.py), each in both generations
of the API, against NumPy on NumPy arrays, and as a custom-call inside a jax.jit graph and a
torch_xla graph (issue 13, "Tests that show it")."""
from __future__ import annotations

import numpy as np
import pytest

from tests.neuron_customcall.nki.tutorial_kernels import TUTORIALS

GENERATIONS = ("beta1", "beta2")
CASES = [pytest.param(t, g, id=f"{t.name}-{g}") for t in TUTORIALS for g in GENERATIONS]


def _check(tutorial, got, inputs):
    want = tutorial.reference(*inputs)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=tutorial.rtol, atol=tutorial.atol)


@pytest.mark.parametrize("tutorial, generation", CASES)
def test_on_numpy_arrays(tutorial, generation):
    inputs = tutorial.inputs(np.random.default_rng(13))
    _check(tutorial, tutorial.kernel(generation)(*inputs), inputs)


@pytest.mark.parametrize("tutorial, generation", CASES)
def test_in_a_jax_graph(tutorial, generation):
    jnp = pytest.importorskip("jax.numpy")
    import neuron_customcall.jax as nj
    inputs = tutorial.inputs(np.random.default_rng(14))
    kernel = tutorial.kernel(generation)
    got = nj.jit(lambda *a: kernel(*a))(*(jnp.asarray(x) for x in inputs))
    _check(tutorial, tuple(got) if isinstance(got, (tuple, list)) else got, inputs)


@pytest.mark.parametrize("tutorial, generation", CASES)
def test_in_a_torch_xla_graph(tutorial, generation):
    torch = pytest.importorskip("torch")
    torch_xla = pytest.importorskip("torch_xla")
    from neuron_customcall.torch_xla import to_cpu
    inputs = tutorial.inputs(np.random.default_rng(15))
    kernel = tutorial.kernel(generation)
    got = kernel(*(torch.from_numpy(x).to(torch_xla.device()) for x in inputs))
    got = tuple(to_cpu(g).numpy() for g in got) if isinstance(got, tuple) else to_cpu(got).numpy()
    _check(tutorial, got, inputs)
