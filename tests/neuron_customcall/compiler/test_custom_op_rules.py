"""AWS's model-wide custom-op limits ("Library Limitations"): one CustomOp library per model, and
no CustomOps in a model that sorts. Checked on whole JAX modules calling C++ ops via cpp_call."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.neuron_customcall.cpp.cpp_kernels import load
from neuron_customcall.compiler import CompileError
from neuron_customcall.jax import cpp_call
from tests.neuron_customcall.compiler.ours import compile_proto, jax_proto


@pytest.fixture(scope="module", autouse=True)
def _libraries() -> None:
    load("relu")
    load("negate")


def _compile(f, *args):
    return compile_proto(jax_proto(f, *args))


def test_two_ops_of_one_library_compile_and_run() -> None:
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    exe = _compile(lambda x: cpp_call("relu_ops::relu_backward", cpp_call("relu_ops::relu_forward", x), x), x)
    np.testing.assert_array_equal(exe.run([x])[0], np.where(x > 0, np.maximum(x, 0), 0))


def test_ops_of_two_libraries_in_one_model_are_refused() -> None:
    x = np.ones((2, 4), np.float32)
    with pytest.raises(CompileError, match=r"from 2 libraries \(.*negate_ops::negate.*relu_ops::relu_forward|"
                                           r"from 2 libraries \(.*relu_ops::relu_forward.*negate_ops::negate"):
        _compile(lambda x: cpp_call("relu_ops::relu_forward", cpp_call("negate_ops::negate", x)), x)


def test_a_model_that_sorts_cannot_have_custom_ops() -> None:
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    with pytest.raises(CompileError, match="models using torch.sort cannot have any CustomOps"):
        _compile(lambda x: jnp.sort(cpp_call("relu_ops::relu_forward", x)), x)
    assert _compile(lambda x: jnp.sort(x), x) is not None  # sorting alone is fine


def test_nki_kernels_are_not_custom_ops_for_these_rules() -> None:
    from tests.neuron_customcall.kernels.seed_kernels import nki_tensor_add

    a = np.ones((128, 512), np.float32)
    exe = _compile(lambda a: jnp.sort(nki_tensor_add(a, a), axis=1), a)
    np.testing.assert_array_equal(exe.run([a])[0], a * 2)
