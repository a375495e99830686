"""Issue 14 "wrong today" at run time: a scratch tensor never aliases get_dst_tensor(); a
multicore kernel that never calls get_dst_tensor() is reported, not zeros; a kernel never
changes an earlier op's output passed to it as an input."""

from __future__ import annotations

import numpy as np
import pytest

from emulator.gpsimd.call import array_value, invoke, output_array
from emulator.gpsimd.errors import KernelError
from gpsimd_kernels import loaded, run, tensor

X = np.arange(16, dtype=np.float32)


def test_a_scratch_tensor_made_before_get_dst_tensor_is_not_the_output() -> None:
    result = run("dst_ops", "scratch_then_dst", tensor(X))
    assert np.array_equal(result.output.view(np.float32), X[::-1])


def test_the_returned_scratch_tensor_is_the_output() -> None:
    result = run("dst_ops", "dst_then_return_scratch", tensor(X))
    assert np.array_equal(result.output.view(np.float32), 2 * X)


def test_get_dst_tensor_twice_is_one_tensor() -> None:
    result = run("dst_ops", "dst_twice", tensor(X))
    assert np.array_equal(result.output.view(np.float32), np.r_[4.0, np.full(15, 3.0)].astype(np.float32))


def test_a_multicore_kernel_that_never_calls_get_dst_tensor_is_reported() -> None:
    with pytest.raises(KernelError, match="no core called get_dst_tensor") as info:
        run("multicore_errors", "no_dst", tensor(X), multicore=True)
    assert info.value.kind == "usage"


def test_an_earlier_ops_output_passed_as_input_is_never_changed() -> None:
    host, runner = loaded("dst_ops")
    copy, fill = host.descriptor.op("copy"), host.descriptor.op("fill_input")
    spec = host.shape(copy, [array_value(X).spec])
    first = output_array(invoke(runner, copy, [("tensor", None)], [array_value(X)], spec))
    value = array_value(first)
    assert value.location is not None  # passed where it lies, without a copy
    for _ in range(2):  # also once the request is prepared
        second = output_array(invoke(runner, fill, [("tensor", None)], [value], spec))
        assert np.array_equal(second, np.full(16, 7.0, dtype=np.float32))
        assert np.array_equal(first, X)
