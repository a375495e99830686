"""Builds the neuron-relu wheel: the Python package plus lib<name>.so compiled from csrc/.

The library is not a Python extension module, so setuptools' compiler driver is not used: a
``build_ext`` subclass hands each ``NeuronLibrary`` to neuron-customcall's builder (the one
``custom_op.load`` uses, minus the loading) and puts the result where setuptools expects the
extension's file, so ``bdist_wheel``, ``pip install`` and editable installs all pick it up, and
the wheel is tagged for this platform.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent


class NeuronLibrary(Extension):
    """A GpSimd custom-op library: compute and shape sources, built as lib<library>.so inside
    package ``package``."""

    def __init__(self, package: str, library: str, compute_srcs: list[str], shape_srcs: list[str],
                 extra_cflags: list[str] | None = None) -> None:
        super().__init__(f"{package}.lib{library}", sources=[*compute_srcs, *shape_srcs])
        self.library = library
        self.compute_srcs = compute_srcs
        self.shape_srcs = shape_srcs
        self.extra_cflags = list(extra_cflags or [])


class BuildNeuronLibraries(build_ext):
    """build_ext for NeuronLibrary extensions (other extensions build as usual)."""

    def get_ext_filename(self, fullname: str) -> str:
        # lib<name>.so, not lib<name>.cpython-311-x86_64-linux-gnu.so: custom_op.load_library
        # takes any path, and the name says what the file is.
        # (distutils asks with the last component of the name, setuptools with the full name.)
        names = {n for ext in self.extensions if isinstance(ext, NeuronLibrary)
                 for n in (ext.name, ext.name.rsplit(".", 1)[-1])}
        if fullname in names:
            return str(Path(*fullname.split("."))) + ".so"
        return super().get_ext_filename(fullname)

    def build_extension(self, ext: Extension) -> None:
        if not isinstance(ext, NeuronLibrary):
            super().build_extension(ext)
            return
        from neuron_customcall.cpp import build as cpp_build  # the build requirement

        # The object cache lives in build_temp, so a rebuild recompiles only changed sources.
        build_dir = Path(self.build_temp or tempfile.mkdtemp()) / "neuron" / ext.library
        request = cpp_build.make_request(
            ext.library,
            [HERE / s for s in ext.compute_srcs],
            [HERE / s for s in ext.shape_srcs],
            build_dir,
            multicore=False,
            verbose=bool(self.verbose > 1),
            extra_cflags=ext.extra_cflags,
        )
        built = cpp_build.build(request)
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, target)


setup(
    ext_modules=[NeuronLibrary("neuron_relu", "neuron_relu", ["csrc/relu.cpp"], ["csrc/relu_shape.cpp"])],
    cmdclass={"build_ext": BuildNeuronLibraries},
)
