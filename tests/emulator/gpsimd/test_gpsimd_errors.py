"""Device errors are Python exceptions naming the op, never memory corruption or a dead host."""

from __future__ import annotations

import numpy as np
import pytest

from emulator.gpsimd import KernelCrash, KernelError, KernelTimeout, ShapeFunctionError, TensorSpec
from gpsimd_kernels import loaded, run, tensor

X = np.arange(16, dtype=np.float32)


@pytest.mark.parametrize(
    "op, kind, words",
    [
        ("oob_element", "bounds", "element accessor index 16 out of range"),
        ("oob_tcm", "bounds", "range [14, 18) is outside the tensor's 16 elements"),
        ("tcm_not_pool", "tcm", "not inside one tcm_malloc'd block"),
        ("oob_stream", "bounds", "read past the end"),
    ],
)
def test_out_of_bounds_access_is_an_error_naming_the_op(op: str, kind: str, words: str) -> None:
    with pytest.raises(KernelError) as info:
        run("error_ops", op, tensor(X))
    assert info.value.kind == kind
    assert f"op '{op}'" in str(info.value) and words in str(info.value)


def test_the_worker_survives_a_device_error() -> None:
    with pytest.raises(KernelError):
        run("error_ops", "oob_element", tensor(X))
    counts = run("error_ops", "tcm_exhaust", tensor(X)).output.view(np.int32)
    assert counts.tolist() == [16, 1]


def test_tcm_pool_is_16_kb_per_core() -> None:
    counts = run("error_ops", "tcm_exhaust", tensor(X))
    assert counts.output.view(np.int32).tolist() == [16, 1]  # 16 blocks of 1 KB, then nullptr
    assert counts.counters["tcm_peak_bytes"] == 16 * 1024


@pytest.mark.parametrize("op, signal", [("segfault", "SIGSEGV"), ("abort_op", "SIGABRT")])
def test_a_crashing_kernel_raises_and_the_host_survives(op: str, signal: str) -> None:
    with pytest.raises(KernelCrash, match=f"op '{op}' crashed .*{signal}"):
        run("error_ops", op, tensor(X))
    # The next call gets a fresh worker.
    assert run("error_ops", "tcm_exhaust", tensor(X)).output.view(np.int32)[0] == 16


def test_a_hanging_kernel_is_killed_after_its_time_limit() -> None:
    with pytest.raises(KernelTimeout, match="op 'hang' ran past its time limit of 1 s"):
        run("error_ops", "hang", tensor(X), timeout=1.0)
    assert run("error_ops", "tcm_exhaust", tensor(X)).output.view(np.int32)[0] == 16


def test_a_shape_function_that_reads_data_is_an_error_that_says_so() -> None:
    host, _ = loaded("error_ops")
    with pytest.raises(ShapeFunctionError, match="shape function tried to access tensor data") as info:
        host.shape(host.descriptor.op("reads_data"), [TensorSpec("float32", (4,))])
    assert info.value.kind == "shape_reads_data"
    assert "op 'reads_data'" in str(info.value)


def test_coherent_policy_rejects_mixed_accessors() -> None:
    with pytest.raises(KernelError, match="accessor coherence: a read stream accessor") as info:
        run("error_ops", "coherence", tensor(X), 0)
    assert info.value.kind == "coherence"


def test_incoherent_policies_warn_or_stay_quiet(capsys: pytest.CaptureFixture[str]) -> None:
    verbose = run("error_ops", "coherence", tensor(X), 1)
    assert np.array_equal(verbose.output.view(np.float32), X)
    assert "incoherent accessors" in verbose.text
    assert "GpSimd printf output: error_ops::coherence" in capsys.readouterr().out
    quiet = run("error_ops", "coherence", tensor(X), 2)
    assert np.array_equal(quiet.output.view(np.float32), X)
    assert quiet.text == ""


def test_a_tensors_own_coherence_policy_as_documented(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(KernelError, match="accessor coherence: a read stream accessor") as info:
        run("dst_ops", "tensor_coherence", tensor(X), 0)
    assert info.value.kind == "coherence"
    verbose = run("dst_ops", "tensor_coherence", tensor(X), 1)
    expected = np.zeros_like(X)  # the policy before: CoherencyEnforcer::Policy::COHERENT
    assert np.array_equal(verbose.output.view(np.float32), expected)
    assert "incoherent accessors" in verbose.text
    quiet = run("dst_ops", "tensor_coherence", tensor(X), 2)
    assert np.array_equal(quiet.output.view(np.float32), expected) and quiet.text == ""
    capsys.readouterr()


def test_multicore_kernels_may_only_use_tcm_accessors() -> None:
    with pytest.raises(KernelError, match="element-wise accessor is not allowed in multicore mode") as info:
        run("multicore_errors", "element_in_multicore", tensor(X), multicore=True)
    assert info.value.kind == "multicore"
    assert "core 0: op 'element_in_multicore'" in str(info.value)


def test_undeclared_stack_overflow_is_reported() -> None:
    with pytest.raises(KernelError, match="stack overflow: the kernel used .* undeclared limit of 8192"):
        run("stack_ops", "big_stack", tensor(X))


def test_declared_stack_size_is_honoured() -> None:
    result = run("stack_ops", "big_stack", tensor(X), flags=("-DSTACK_SIZE=65536",))
    assert result.output.view(np.float32)[0] == sum(range(0, 8192, 1024))
    assert 32 * 1024 <= result.counters["stack_bytes"] <= 65536 + 16 * 1024
    host, _ = loaded("stack_ops", flags=("-DSTACK_SIZE=65536",))
    assert host.descriptor.stack_size == 65536


def test_the_400_kb_maximum_stack_is_accepted() -> None:
    result = run("stack_ops", "big_stack", tensor(X), flags=("-DSTACK_SIZE=409600",))
    assert result.output.view(np.float32)[0] == sum(range(0, 8192, 1024))


@pytest.mark.parametrize("op", ["tcm_overrun_freed", "tcm_overrun_kept"])
def test_writing_past_a_tcm_buffer_is_an_error_not_corruption(op: str) -> None:
    with pytest.raises(KernelError, match=f"op '{op}': TCM buffer overrun: .* block of 256 bytes") as info:
        run("access_ops", op, tensor(X))
    assert info.value.kind == "tcm"
