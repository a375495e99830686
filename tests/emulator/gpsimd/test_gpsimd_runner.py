"""The runner: results, counters, printf capture, multicore, descriptors and library bytes."""

from __future__ import annotations

import numpy as np
import pytest

from emulator.gpsimd import GpSimdRunner, HostLibrary, LibraryDescriptor, OpDescriptor, TensorSpec, estimate
from emulator.gpsimd import cost, elf, signature
from emulator.gpsimd.errors import KernelError, LibraryError
from gpsimd_kernels import library, loaded, run, tensor

N = 5000
X = np.linspace(-3, 3, N, dtype=np.float32)


@pytest.mark.parametrize(
    "op, counter, value",
    [
        ("copy_elem", "element_accesses", 2 * N),
        ("copy_stream", "stream_bytes", 8 * N),
        ("copy_tcm", "tcm_bytes", 8 * N),
        ("double_it", "arith_elements", N),
    ],
)
def test_each_accessor_kind_copies_and_is_counted(op: str, counter: str, value: int) -> None:
    result = run("access_ops", op, tensor(X))
    expected = X + X if op == "double_it" else X
    assert np.array_equal(result.output.view(np.float32), expected)
    assert result.counters[counter] == value
    others = {"element_accesses", "stream_bytes", "tcm_bytes", "arith_elements"} - {counter}
    assert all(result.counters[name] == 0 for name in others)


def test_stream_accessors_take_tcm_from_the_pool() -> None:
    result = run("access_ops", "copy_stream", tensor(X))
    assert result.counters["tcm_peak_bytes"] == 8 * 1024  # two 4 KB stream buffers


def test_returning_an_input_copies_it_to_the_output() -> None:
    assert np.array_equal(run("access_ops", "return_input", tensor(X)).output.view(np.float32), X)


def test_cost_model_orders_the_accessors() -> None:
    cycles = {op: run("access_ops", op, tensor(X)).counters for op in ("copy_elem", "copy_stream", "copy_tcm")}
    est = {op: estimate(c).cycles for op, c in cycles.items()}
    assert est["copy_tcm"] < est["copy_stream"] < est["copy_elem"]
    assert est["copy_tcm"] == pytest.approx(8 * N / cost.TCM_DMA_BYTES_PER_CYCLE)
    assert estimate(cycles["copy_tcm"], ncores=8).cycles == pytest.approx(est["copy_tcm"] / 8)


def test_printf_is_printed_after_execution_under_a_header(capsys: pytest.CaptureFixture[str]) -> None:
    result = run("multicore_errors", "chatty", tensor(X[:16]), 3, multicore=True)
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "----- GpSimd printf output: mc_errors::chatty (core 0) -----"
    assert "core 0 says line 000002" in out
    assert "core 1" not in out and "core 1" not in result.text  # only core 0 prints
    assert result.ncores == 8


def test_printf_overflow_keeps_the_newest_output(capsys: pytest.CaptureFixture[str]) -> None:
    lines = 3000  # about 75 KB, more than the 64 KB device buffer
    result = run("multicore_errors", "chatty", tensor(X[:16]), lines, multicore=True)
    assert result.counters["printf_lost_bytes"] > 0
    assert result.text.endswith(f"core 0 says line {lines - 1:06d}\n")
    assert "core 0 says line 000000" not in result.text
    assert "bytes of older output lost" in capsys.readouterr().out


def test_descriptors_round_trip_through_json() -> None:
    host, _ = loaded("access_ops")
    desc = host.descriptor
    assert LibraryDescriptor.from_json(desc.to_json()) == desc
    op = desc.op("copy_tcm")
    assert OpDescriptor.from_json(op.to_json()) == op
    assert op.symbol == "_Z8copy_tcmRKN5torch6TensorE" and op.args == ("tensor",)


def test_runner_accepts_library_bytes() -> None:
    path = library("access_ops")
    host = HostLibrary(path)
    runner = GpSimdRunner(path.read_bytes(), timeout=60)
    try:
        op = host.descriptor.op("copy_elem")
        out = host.shape(op, [TensorSpec("float32", (N,))])
        result = runner.run(op, [tensor(X)], out)
        assert np.array_equal(result.output.view(np.float32), X)
    finally:
        runner.close()


def test_elf_lists_the_compute_functions() -> None:
    names = elf.defined_functions(library("access_ops").read_bytes())
    assert elf.symbols_for("copy_elem", names) == ["_Z9copy_elemRKN5torch6TensorE"]
    assert elf.symbols_for("copy", names) == []


@pytest.mark.parametrize(
    "demangled, rule",
    [
        ("f(float)", "float arguments are not supported"),
        ("f(int)", "int arguments are not supported"),
        ("f(std::vector<double, std::allocator<double> >)", "std::vector arguments"),
    ],
)
def test_compute_signature_rules(demangled: str, rule: str) -> None:
    with pytest.raises(LibraryError, match=rule):
        signature.check("op 'f'", demangled, ("double",))


def test_compute_signature_must_match_the_shape_function() -> None:
    signature.check("op 'f'", "f(torch::Tensor const&, double, long, torch::Scalar)",
                    ("tensor", "double", "int64", "scalar"))
    with pytest.raises(LibraryError, match="takes \\(tensor\\) but its shape function takes \\(tensor, double\\)"):
        signature.check("op 'f'", "f(torch::Tensor)", ("tensor", "double"))


def test_outputs_view_shared_memory_that_is_reused_only_when_released() -> None:
    first = run("access_ops", "copy_tcm", tensor(X))
    kept = first.output.view(np.float32)
    second = run("access_ops", "copy_tcm", tensor(-X))
    assert np.array_equal(kept, X) and np.array_equal(second.output.view(np.float32), -X)
    del first, kept, second
    third = run("access_ops", "copy_tcm", tensor(2 * X))
    assert np.array_equal(third.output.view(np.float32), 2 * X)


def test_any_number_of_stream_accessors_work_and_four_are_fast() -> None:
    result = run("access_ops", "five_streams", tensor(X))
    assert np.array_equal(result.output.view(np.float32), X + X + X + X + X)
    # Four streams fill the 16 KB pool and move data through TCM; the other two go element by
    # element, costed as element-wise accessors.
    assert result.counters["tcm_peak_bytes"] == 16 * 1024
    assert result.counters["stream_bytes"] == 4 * 4 * N
    assert result.counters["element_accesses"] == 2 * N
    fast = run("access_ops", "copy_stream", tensor(X)).cost.cycles
    assert result.cost.cycles >= 2 * N * cost.ELEMENT_ACCESS_CYCLES > fast


def test_a_result_that_contradicts_the_shape_function_is_an_error() -> None:
    with pytest.raises(KernelError, match=r"returned Float\[1, 2\] but the shape function declared Float\[5000\]"):
        run("access_ops", "wrong_shape", tensor(X))


def test_printf_in_a_shape_function_prints_on_the_host(capfd: pytest.CaptureFixture[str]) -> None:
    host, _ = loaded("access_ops")
    assert host.shape(host.descriptor.op("noisy"), [TensorSpec("float32", (6, 7))]) == TensorSpec("float32", (6, 7))
    assert "shape function sees 42 elements" in capfd.readouterr().out
