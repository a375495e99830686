"""Kernels under plain jax.jit on JAX's own CPU backend (JAX_PLATFORMS=cpu, as this suite runs):
XLA:CPU has no Neuron custom-call, so a kernel call lowers to JAX's host callback and runs on the
emulator, the rest on XLA:CPU (issue 11). Before, the program failed with XLA's "No registered
implementation for untyped custom call to AwsNeuronCustomNativeKernel for Host". A kernel error
reaches the caller with our message; lowering for our backend keeps the custom-call."""
from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import neuron_customcall.jax as nj
from neuron_customcall import custom_op
from neuron_customcall.jax import cpp_call, nki_call
from neuron_customcall.jax.primitive import neuron_lowering
from tests.neuron_customcall.cpp import cpp_kernels
from tests.neuron_customcall.kernels.seed_kernels import nki_tensor_add, nki_tensor_add_kernel_


def _ab():
    ka, kb = jax.random.split(jax.random.PRNGKey(3))
    return (jax.random.normal(ka, (256, 1024), jnp.float32), jax.random.normal(kb, (256, 1024), jnp.float32))


def test_an_nki_kernel_under_plain_jit_runs_on_xla_cpu_through_a_host_callback() -> None:
    assert jax.default_backend() == "cpu"
    a, b = _ab()
    f = jax.jit(lambda a, b: a * b * nki_tensor_add(a, b))
    np.testing.assert_allclose(np.asarray(f(a, b)), np.asarray(a * b * (a + b)), rtol=1e-6)
    text = f.lower(a, b).as_text(dialect="hlo")
    assert "AwsNeuronCustomNativeKernel" not in text and "callback" in text


def test_nki_call_with_out_shape_grad_through_custom_vjp_and_vmap() -> None:
    a, b = _ab()

    @jax.custom_vjp
    def add(x, y):
        return nki_call(nki_tensor_add_kernel_, x, y, grid=(2, 2),
                        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))

    add.defvjp(lambda x, y: (add(x, y), None), lambda _, g: (g, g))
    ga, gb = jax.jit(jax.grad(lambda x, y: (add(x, y) * x * y).sum(), argnums=(0, 1)))(a, b)
    np.testing.assert_allclose(np.asarray(ga), np.asarray(2 * a * b + b ** 2), rtol=1e-5, atol=1e-5)
    stacked = jnp.stack([a[:128, :512], b[:128, :512]])
    out = jax.jit(jax.vmap(lambda p: nki_tensor_add_kernel_[1, 1](p, p)))(stacked)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(2 * stacked))


def test_a_cpp_op_under_plain_jit() -> None:
    cpp_kernels.load("relu")
    x = jnp.linspace(-2, 2, 8 * 16, dtype=jnp.float32).reshape(8, 16)
    f = jax.jit(lambda x: cpp_call("relu_ops::relu_forward", x) + 1)
    np.testing.assert_array_equal(np.asarray(f(x)), np.maximum(np.asarray(x), 0) + 1)


def test_a_kernel_error_reaches_the_caller_with_our_message(tmp_path: Path) -> None:
    (tmp_path / "boom.cpp").write_text(
        "#include <stdexcept>\n#include <torch/torch.h>\n"
        "torch::Tensor boom(const torch::Tensor& t) { throw std::runtime_error(\"boom: bad input\"); }\n")
    (tmp_path / "boom_shape.cpp").write_text(
        '#include <torch/torch.h>\n#include "torchneuron/register.h"\n'
        "torch::Tensor boom_shape(torch::Tensor t) { return torch::zeros(t.sizes(), torch::kFloat); }\n"
        'NEURON_LIBRARY(boom_ops, m) { m.def("boom", &boom_shape, "boom"); }\n')
    custom_op.load("boom", [tmp_path / "boom.cpp"], [tmp_path / "boom_shape.cpp"], build_directory=tmp_path / "b")
    f = jax.jit(lambda x: cpp_call("boom_ops::boom", x) * 2)
    with pytest.raises(Exception, match="boom: bad input") as info:
        np.asarray(f(jnp.ones((4, 4), jnp.float32)))
    assert "boom" in str(info.value)


def test_lowering_for_our_backend_keeps_the_custom_call() -> None:
    a, b = _ab()
    fn = lambda a, b: nki_tensor_add(a, b) * 2  # noqa: E731
    with neuron_lowering():
        text = jax.jit(fn).lower(a, b).as_text(dialect="hlo")
    assert 'custom_call_target="AwsNeuronCustomNativeKernel"' in text
    # the same function through plain jax.jit and neuron_customcall.jax.jit, in either order:
    # each keeps its own lowering (JAX caches lowerings per function)
    np.testing.assert_allclose(np.asarray(jax.jit(fn)(a, b)), np.asarray((a + b) * 2), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(nj.jit(fn)(a, b)), np.asarray((a + b) * 2), rtol=1e-6)
    g = lambda a, b: nki_tensor_add(a, b) * 3  # noqa: E731
    np.testing.assert_allclose(np.asarray(nj.jit(g)(a, b)), np.asarray((a + b) * 3), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jax.jit(g)(a, b)), np.asarray((a + b) * 3), rtol=1e-6)
