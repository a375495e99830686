"""neuron_customcall.cpp.extension: setuptools builds a NeuronLibrary into its package as
lib<name>.so with custom_op's builder, leaves other extensions to setuptools, and the result loads.
(The full wheel round trip, fresh environment included: tests/examples/test_custom_op_wheel.py.)"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from setuptools import Distribution

from neuron_customcall.cpp.build import BuildError
from neuron_customcall.cpp.extension import BuildExtension, NeuronLibrary

SOURCES = Path(__file__).resolve().parents[3] / "examples" / "custom_op_wheel" / "csrc"


def _project(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    shutil.copytree(SOURCES, tmp_path / "csrc")
    return tmp_path


def _build(project: Path, ext: NeuronLibrary, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(project)  # setuptools runs commands from the project directory
    dist = Distribution({"name": "pkg", "packages": ["pkg"], "ext_modules": [ext],
                         "cmdclass": {"build_ext": BuildExtension}})
    cmd = dist.get_command_obj("build_ext")
    cmd.inplace = True
    cmd.ensure_finalized()
    cmd.run()
    return project / "pkg" / f"lib{ext.library}.so"


def test_library_lands_in_its_package_and_loads(tmp_path, monkeypatch):
    import torch

    from neuron_customcall import custom_op

    lib = _build(_project(tmp_path), NeuronLibrary("pkg", "neuron_relu", ["csrc/relu.cpp"],
                                                   ["csrc/relu_shape.cpp"]), monkeypatch)
    assert lib.is_file() and lib.name == "libneuron_relu.so"  # not a cpython-tagged name
    assert not list((tmp_path / "pkg").glob("*cpython*"))
    custom_op.load_library(lib)
    x = torch.randn(16, 8)
    torch.testing.assert_close(torch.ops.neuron_relu.relu_forward(x), torch.relu(x))


def test_build_errors_name_the_source(tmp_path, monkeypatch):
    project = _project(tmp_path)
    (project / "csrc" / "broken.cpp").write_text("this is not C++;\n")
    ext = NeuronLibrary("pkg", "broken_ops", ["csrc/broken.cpp"], ["csrc/relu_shape.cpp"])
    with pytest.raises(BuildError, match="broken.cpp"):
        _build(project, ext, monkeypatch)


def test_missing_source_is_a_clear_error(tmp_path, monkeypatch):
    project = _project(tmp_path)
    ext = NeuronLibrary("pkg", "absent_ops", ["csrc/absent.cpp"], ["csrc/relu_shape.cpp"])
    with pytest.raises(BuildError, match="no such source file.*absent.cpp"):
        _build(project, ext, monkeypatch)
    assert os.path.isdir(project / "pkg")


def test_a_compute_function_returning_double_fails_the_build(tmp_path, monkeypatch):
    # Its symbol does not carry its return type: without the check the wheel would ship a library
    # whose call crashes the worker (custom_op.load checks the same; docs/gpsimd.md).
    project = _project(tmp_path)
    (project / "csrc" / "bad.cpp").write_text(
        "#include <torch/torch.h>\n"
        "double relu_forward(const torch::Tensor& t) { return 1.0; }\n"
        "torch::Tensor relu_backward(const torch::Tensor& g, const torch::Tensor& t) { return g; }\n")
    ext = NeuronLibrary("pkg", "neuron_relu", ["csrc/bad.cpp"], ["csrc/relu_shape.cpp"])
    with pytest.raises(BuildError, match="compute function 'relu_forward': a compute function must return"):
        _build(project, ext, monkeypatch)
