"""A misspelt library or op name is a sentence naming the close names, from every front door
(JAX's cpp_call, custom_op's lookups), not a bare KeyError (issue 17)."""
from __future__ import annotations

import numpy as np
import pytest

from emulator.gpsimd.errors import UnknownNameError
from neuron_customcall import custom_op
from tests.neuron_customcall.cpp import cpp_kernels


@pytest.fixture(scope="module", autouse=True)
def relu_ops():
    cpp_kernels.load("relu")  # NEURON_LIBRARY(relu_ops): relu_forward, relu_backward, ...


def test_jax_cpp_call_suggests_the_op():
    from neuron_customcall.jax import cpp_call

    with pytest.raises(UnknownNameError, match=r"no op 'relu_forwrd' in library 'relu_ops'; did you mean 'relu_forward'") as e:
        cpp_call("relu_ops::relu_forwrd", np.ones((4, 4), np.float32))
    assert isinstance(e.value, KeyError)  # still a lookup failure for callers that catch it
    assert not str(e.value).startswith('"')  # a sentence, not KeyError's quoted repr


def test_jax_cpp_call_suggests_the_library():
    from neuron_customcall.jax import cpp_call

    with pytest.raises(UnknownNameError, match=r"no custom-op library 'relu_opz'.*did you mean 'relu_ops'"):
        cpp_call("relu_opz::relu_forward", np.ones((4, 4), np.float32))


def test_custom_op_lookups_name_the_loaded_libraries():
    with pytest.raises(UnknownNameError, match=r"no custom-op library 'nothing_like_it'.*known: .*relu_ops"):
        custom_op.descriptor("nothing_like_it")
