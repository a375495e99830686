"""NKI kernels and C++ custom ops in JAX graphs: the seed's a * b * (a + b) forward and through
jax.custom_vjp, nki_call with out_shape, vmap, eager calls, and an MLP with a C++ ReLU trained
with custom_vjp on the emulator against plain JAX on XLA:CPU."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import neuron_customcall.jax as nj
from neuron_customcall.jax import cpp_call, nki_call
from neuron_customcall import nki
from neuron_customcall.nki import NKIError
from neuron_customcall.nki import language as nl
from tests.neuron_customcall.kernels.seed_kernels import (nki_tensor_add, nki_tensor_add_kernel_,
                                                          scale_and_shift)


def _inputs(shape=(256, 1024)):
    seed_a, seed_b = jax.random.split(jax.random.PRNGKey(0))
    return (jax.random.normal(seed_a, shape, dtype=jnp.float32),
            jax.random.normal(seed_b, shape, dtype=jnp.float32))


def jax_customop_tutorial(a, b):
    c = nki_tensor_add(a, b)  # calling a NKI kernel, instead of the built-in jax op
    return a * b * c


def test_seed_forward_matches_jax_and_holds_the_custom_call():
    a, b = _inputs()
    out = nj.jit(jax_customop_tutorial)(a, b)
    np.testing.assert_allclose(out, a * b * (a + b), rtol=1e-6)
    text = nj.jit(jax_customop_tutorial).lower(a, b).as_text(dialect="hlo")
    calls = [line for line in text.splitlines() if "custom-call(" in line]
    assert len(calls) == 1
    assert 'custom_call_target="AwsNeuronCustomNativeKernel"' in calls[0]
    assert "api_version=API_VERSION_STATUS_RETURNING" in calls[0]
    assert "nki_call" in text  # the primitive's name in the metadata, as on the SDK


@jax.custom_vjp
def nki_add_func(a, b):
    return nki_tensor_add(a, b)


def f_forward(a, b):
    return nki_add_func(a, b), (a, b)  # operator output and residual (same as input here)


def f_backward(res, grad):
    return grad, grad  # gradients for a and b


nki_add_func.defvjp(f_forward, f_backward)


def test_seed_training_graph_through_custom_vjp():
    def jax_customop_tutorial_and_grad(a, b):
        out = nki_add_func(a, b) * a * b
        grad = jax.grad(lambda x, y: (nki_add_func(x, y) * x * y).sum(), argnums=(0, 1))(a, b)
        return out, *grad

    def reference(a, b):
        out = (a + b) * a * b
        grad = jax.grad(lambda x, y: ((x + y) * x * y).sum(), argnums=(0, 1))(a, b)
        return out, *grad

    a, b = _inputs()
    got = nj.jit(jax_customop_tutorial_and_grad)(a, b)
    want = jax.jit(reference)(a, b)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    text = nj.jit(jax_customop_tutorial_and_grad).lower(a, b).as_text(dialect="hlo")
    assert text.count('custom_call_target="AwsNeuronCustomNativeKernel"') == 2


def test_nki_call_with_out_shape_and_its_check():
    a, b = _inputs()
    struct = jax.ShapeDtypeStruct(a.shape, a.dtype)
    f = nj.jit(lambda a, b: nki_call(nki_tensor_add_kernel_, a, b, grid=(2, 2), out_shape=struct))
    np.testing.assert_array_equal(f(a, b), a + b)
    with pytest.raises(NKIError, match="out_shape"):
        jax.jit(lambda a, b: nki_call(nki_tensor_add_kernel_, a, b, grid=(2, 2),
                                      out_shape=jax.ShapeDtypeStruct((256, 1024), jnp.bfloat16))
                ).lower(a, b)


def add_into(a_input, b_input, c_output):
    """The SDK's older style: the output is a trailing parameter, nothing is returned."""
    ix, iy = nl.mgrid[0:128, 0:512]
    nl.store(c_output[ix, iy], value=nl.load(a_input[ix, iy]) + nl.load(b_input[ix, iy]))


def test_nki_call_allocates_trailing_outputs_from_out_shape():
    a, b = _inputs((128, 512))
    out = nj.jit(lambda a, b: nki_call(add_into, a, b, out_shape=jax.ShapeDtypeStruct(a.shape, a.dtype)))(a, b)
    np.testing.assert_array_equal(out, a + b)


def test_two_outputs_and_static_arguments():
    x, _ = _inputs((128, 64))
    y, z = nj.jit(lambda x: scale_and_shift(x, 3.0, -1.0))(x)
    np.testing.assert_allclose(y, 3 * x, rtol=1e-6)
    np.testing.assert_allclose(z, x - 1, rtol=1e-6)


def test_vmap_batches_the_kernel_along_a_new_grid_axis():
    x, y = _inputs((3, 128, 512))
    f = jax.vmap(lambda p, q: nki_tensor_add_kernel_[1, 1](p, q))
    np.testing.assert_array_equal(nj.jit(f)(x, y), x + y)
    text = nj.jit(f).lower(x, y).as_text(dialect="hlo")
    (call,) = [line for line in text.splitlines() if "custom-call(" in line]
    assert call.lstrip().split(" = ")[1].startswith("f32[3,128,512]")  # one call, batched
    np.testing.assert_array_equal(f(x, y), x + y)  # eager: the batched kernel on the emulator
    g = jax.vmap(lambda p: nki_tensor_add_kernel_[1, 1](p, y[0]))  # one operand unbatched
    np.testing.assert_array_equal(nj.jit(g)(x), x + y[0])
    h = jax.vmap(lambda p, q: nki_tensor_add_kernel_[1, 1](p, q), in_axes=(1, 1))
    xt, yt = jnp.swapaxes(x, 0, 1), jnp.swapaxes(y, 0, 1)
    np.testing.assert_array_equal(nj.jit(h)(xt, yt), x + y)


def test_nested_vmap_falls_back_to_one_call_per_element_when_the_grid_is_full():
    x, y = _inputs((2, 2, 256, 1024))
    f = jax.vmap(jax.vmap(nki_tensor_add))  # grid (2, 2) + 1 axis, then no room for another
    np.testing.assert_array_equal(nj.jit(f)(x, y), x + y)
    text = nj.jit(f).lower(x, y).as_text(dialect="hlo")
    assert text.count("custom-call(") == 2


def test_eager_jax_arrays_run_on_the_emulator():
    a, b = _inputs()
    c = nki_tensor_add(a, b)
    assert isinstance(c, jax.Array)
    np.testing.assert_array_equal(c, a + b)


# --- C++ custom ops from JAX --------------------------------------------------------------------

@pytest.fixture(scope="module")
def relu_ops():
    from tests.neuron_customcall.cpp import cpp_kernels

    cpp_kernels.load("relu")
    return "relu_ops"


@jax.custom_vjp
def cpp_relu(x):
    return cpp_call("relu_ops::relu_forward", x)


def _relu_fwd(x):
    return cpp_relu(x), x


def _relu_bwd(x, g):
    return (cpp_call("relu_ops::relu_backward", g, x),)


cpp_relu.defvjp(_relu_fwd, _relu_bwd)


def test_cpp_op_eager_and_in_jit(relu_ops):
    x, _ = _inputs((8, 16))
    np.testing.assert_array_equal(cpp_call("relu_ops::relu_forward", x), jax.nn.relu(x))
    f = nj.jit(lambda x: cpp_call("relu_ops.relu_forward", x) * 2)
    np.testing.assert_array_equal(f(x), jax.nn.relu(x) * 2)
    text = nj.jit(lambda x: cpp_call("relu_ops::relu_forward", x)).lower(x).as_text(dialect="hlo")
    assert 'custom_call_target="AwsNeuronCustomNativeKernel"' in text
    with pytest.raises(ValueError, match="library::op"):
        cpp_call("relu_forward", x)


def _init(key, sizes=(32, 64, 48, 10)):
    params = []
    for k, (m, n) in zip(jax.random.split(key, len(sizes) - 1), zip(sizes[:-1], sizes[1:])):
        params.append((jax.random.normal(k, (m, n)) / np.sqrt(m), jnp.zeros(n)))
    return params


def _train(relu, steps=20):
    def loss_fn(params, x, y):
        h = x
        for k, (w, b) in enumerate(params):
            h = h @ w + b
            if k < len(params) - 1:
                h = relu(h)
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(h), y[:, None], axis=1))

    def step(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), loss

    return loss_fn, step


def test_mlp_with_cpp_relu_trains_like_jax(relu_ops):
    key_x, key_y, key_p = jax.random.split(jax.random.PRNGKey(1), 3)
    x = jax.random.normal(key_x, (16, 32))
    y = jax.random.randint(key_y, (16,), 0, 10)
    losses = {}
    for name, relu, jit in (("cpp", cpp_relu, nj.jit), ("jax", jax.nn.relu, jax.jit)):
        _, step = _train(relu)
        step = jit(step)
        params, out = _init(key_p), []
        for _ in range(20):
            params, loss = step(params, x, y)
            out.append(float(loss))
        losses[name] = out
    np.testing.assert_allclose(losses["cpp"], losses["jax"], rtol=1e-4, atol=1e-5)
    assert losses["cpp"][-1] < losses["cpp"][0]


def test_cpp_ops_with_inline_scalars_multicore_and_bf16():
    from tests.neuron_customcall.cpp import cpp_kernels

    for name in ("dtype_ops", "relu_multicore"):
        cpp_kernels.load(name)
    x, y = _inputs((4, 50))
    f = nj.jit(lambda x, y: cpp_call("dtype_ops::axpb", x, y, -1.25, 2.0, -2))
    np.testing.assert_allclose(f(x, y), -1.25 * x + 2 * y - 2, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(nj.jit(lambda x: cpp_call("relu_mc::relu_forward", x))(x), jax.nn.relu(x))
    h = x[0].astype(jnp.bfloat16)  # add_one takes 1-D tensors
    np.testing.assert_array_equal(nj.jit(lambda h: cpp_call("dtype_ops::add_one", h))(h), h + 1)


def test_differentiating_a_kernel_without_custom_vjp_says_how():
    a, b = _inputs((128, 512))
    with pytest.raises(TypeError, match="jax.custom_vjp"):
        jax.grad(lambda a: nki_tensor_add_kernel_[1, 1](a, b).sum())(a)


def test_bfloat16_nki_kernel():
    from tests.neuron_customcall.nki.test_nki_kernels import axpy_kernel

    x, y = (t.astype(jnp.bfloat16) for t in _inputs((256, 64)))
    out = nj.jit(lambda a, b: axpy_kernel[2](a, b))(x, y)
    assert out.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(out, np.float32), np.asarray(3 * x.astype(jnp.float32) + y),
                               rtol=1e-2, atol=1e-1)


def test_out_shape_never_fills_a_parameter_that_has_a_default():
    x, _ = _inputs((128, 64))

    @nki.jit
    def times(x_in, factor=2.0):
        out = nl.ndarray(x_in.shape, dtype=x_in.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:x_in.shape[0], 0:x_in.shape[1]]
        nl.store(out[i_p, i_f], value=nl.multiply(nl.load(x_in[i_p, i_f]), factor))
        return out

    out = nj.jit(lambda x: nki_call(times, x, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype)))(x)
    np.testing.assert_allclose(out, 2 * x, rtol=1e-6)
