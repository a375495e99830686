"""Issue 14 "wrong today", the rules the compiler enforces: accessors of a `const Tensor&` input
are read-only (AWS's API reference declares `accessor() const&`, `tcm_accessor() const&` and
`write_stream_accessor() &`), and a compute function must return torch::Tensor (one returning
`double` crashed the worker with SIGBUS)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from neuron_customcall import custom_op
from neuron_customcall.cpp.errors import BuildError

SHAPE = """#include <stdint.h>
#include <torch/torch.h>
#include "torchneuron/register.h"
torch::Tensor k_shape(torch::Tensor t) { return torch::zeros(t.sizes(), torch::kFloat); }
NEURON_LIBRARY(%s, m) { m.def("k", &k_shape, "k"); }
"""
HEAD = "#include <stdint.h>\n#include <torch/torch.h>\n"


def _load(tmp: Path, lib: str, compute: str) -> Path:
    (tmp / "k.cpp").write_text(HEAD + compute)
    (tmp / "shape.cpp").write_text(SHAPE % lib)
    return custom_op.load(lib, [tmp / "k.cpp"], [tmp / "shape.cpp"], build_directory=tmp / "build")


@pytest.mark.parametrize("body, diagnostic", [
    ("auto a = t.accessor<float, 1>(); a[0] = 1.0f;", "read-only"),
    ("auto a = t.tcm_accessor(); float b[4] = {0}; a.tcm_to_tensor<float>(b, 0, 4);", "read-only TensorTcmAccessor"),
    ("auto w = t.write_stream_accessor<float>(); w.write(1.0f);", "a const Tensor \\(an input\\) is read-only"),
])
def test_writing_a_const_input_through_an_accessor_is_a_compile_error(tmp_path: Path, body: str,
                                                                       diagnostic: str) -> None:
    compute = f"torch::Tensor k(const torch::Tensor& t) {{ {body} return torch::zeros(t.sizes(), torch::kFloat); }}\n"
    with pytest.raises(BuildError, match=diagnostic) as info:
        _load(tmp_path, "const_write", compute)
    assert f"{tmp_path / 'k.cpp'}:3" in str(info.value)  # points at the user's line


def test_read_only_accessors_read_and_the_documented_types_name_them(tmp_path: Path) -> None:
    compute = """
torch::Tensor k(const torch::Tensor& t) {
    torch::Tensor scratch = torch::zeros(t.sizes(), torch::kFloat);
    {
        torch::TensorTcmAccessor<true> tin = t.tcm_accessor();
        torch::TensorTcmAccessor<false> tout = scratch.tcm_accessor();
        float buf[2];
        tin.tensor_to_tcm<float>(buf, 0, 2);
        tout.tcm_to_tensor<float>(buf, 0, 2);
    }
    {
        torch::TensorAccessor<float, 1, true> in = t.accessor<float, 1>();
        torch::TensorAccessor<float, 1, false> s = scratch.accessor<float, 1>();
        for (int64_t i = 2; i < t.numel(); i++) s[i] = in[i];
        for (int64_t i = 0; i < t.numel(); i++) {
            if (s[i] != in[i]) return torch::zeros(t.sizes(), torch::kFloat);
        }
    }
    torch::Tensor out = torch::empty(t.sizes(), torch::kFloat);
    torch::TensorReadStreamAccessor<float> r = scratch.read_stream_accessor<float>();
    torch::TensorWriteStreamAccessor<float> w = out.write_stream_accessor<float>();
    for (int64_t i = 0; i < t.numel(); i++) w.write(r.read());
    if (r.close() != 0 || w.close() != 0) return t;
    return out;
}
"""
    _load(tmp_path, "const_read", compute)
    x = torch.arange(6, dtype=torch.float32)
    assert torch.equal(torch.ops.const_read.k(x), x)


def test_a_compute_function_returning_double_is_refused_at_build_time(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="compute function 'k': a compute function must return torch::Tensor"):
        _load(tmp_path, "returns_double", "double k(const torch::Tensor& t) { return 1.0; }\n")


def test_the_return_check_passes_tensor_returns_and_is_cached(tmp_path: Path,
                                                             capfd: pytest.CaptureFixture[str]) -> None:
    compute = "torch::Tensor k(const torch::Tensor& t) { return torch::mul(t, torch::Scalar(-1.0)); }\n"
    (tmp_path / "k.cpp").write_text(HEAD + compute)
    (tmp_path / "shape.cpp").write_text(SHAPE % "returns_ok")
    for _ in range(2):
        custom_op.load("returns_ok", [tmp_path / "k.cpp"], [tmp_path / "shape.cpp"],
                       build_directory=tmp_path / "build", verbose=True)
    err = capfd.readouterr().err
    assert err.count("-fsyntax-only") == 1  # the second load reuses the first check
    assert torch.equal(torch.ops.returns_ok.k(torch.ones(3)), -torch.ones(3))
