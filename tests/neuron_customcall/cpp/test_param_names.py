"""C++ op schema arguments carry the compute function's parameter names, read from the sources
the library is built from (issue 17: they were a0, a1, ...); positional names remain where the
source names nothing usable."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from neuron_customcall.cpp.param_names import parameter_names, usable
from tests.neuron_customcall.cpp import cpp_kernels


def _names(tmp_path: Path, source: str, function: str, count: int) -> tuple[str, ...]:
    path = tmp_path / "k.cpp"
    path.write_text(source)
    return parameter_names([path], function, count)


def test_names_come_from_the_definition_not_from_calls_or_comments(tmp_path: Path) -> None:
    source = """
    // torch::Tensor scale(const torch::Tensor& commented_out, double no) {
    static const char* doc = "torch::Tensor scale(const torch::Tensor& in_a_string, double no) {";
    torch::Tensor helper(const torch::Tensor& x) { return scale(x, 2.0); }   // a call, not a definition
    torch::Tensor scale(const torch::Tensor & input,
                        /* the factor */ double factor = 1.0,
                        const std::map<int, std::vector<float>>& table,
                        int64_t mode) noexcept {
        return input;
    }
    """
    assert _names(tmp_path, source, "scale", 4) == ("input", "factor", "table", "mode")


def test_overloads_are_told_apart_by_their_parameter_count(tmp_path: Path) -> None:
    source = """
    torch::Tensor op(const torch::Tensor& t) { return t; }
    torch::Tensor op(const torch::Tensor& lhs, const torch::Tensor& rhs) { return lhs; }
    """
    assert _names(tmp_path, source, "op", 2) == ("lhs", "rhs")
    assert _names(tmp_path, source, "op", 1) == ("t",)


def test_unnamed_or_unusable_names_stay_positional(tmp_path: Path) -> None:
    source = "torch::Tensor f(const torch::Tensor&, const double, torch::Tensor src, int64_t lambda) {}"
    assert _names(tmp_path, source, "f", 4) == ("a0", "a1", "src", "a3")  # 'lambda': a Python keyword
    assert _names(tmp_path, source, "missing", 2) == ("a0", "a1")
    assert _names(tmp_path, source, "f", 3) == ("a0", "a1", "a2")  # no definition with 3 parameters
    assert usable(["x", "x"]) == ("a0", "a1")  # repeated names
    assert usable(["a1", None]) == ("a0", "a1")  # a found name would clash with a positional one


def test_loaded_ops_have_their_cpp_parameter_names() -> None:
    cpp_kernels.load("relu")
    cpp_kernels.load("dtype_ops")
    schema = str(torch.ops.relu_ops.relu_backward.default._schema)
    assert "relu_backward(Tensor t_grad, Tensor t_in) -> Tensor" in schema
    assert "scalar_ops(Tensor t, Scalar s, float bound)" in str(torch.ops.dtype_ops.scalar_ops.default._schema)
    grad, x = torch.tensor([[1.0, 2.0]]), torch.tensor([[-1.0, 3.0]])
    torch.testing.assert_close(torch.ops.relu_ops.relu_backward(t_grad=grad, t_in=x), torch.tensor([[0.0, 2.0]]))
    with pytest.raises(RuntimeError, match="t_in"):
        torch.ops.relu_ops.relu_backward(t_grad=grad)
