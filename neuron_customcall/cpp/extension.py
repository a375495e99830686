"""Packaging a C++ custom-op library as a wheel, the way torch.utils.cpp_extension does it for
PyTorch extensions: a setuptools ``Extension`` type and a ``build_ext`` command class.

    # setup.py of the user's project
    from setuptools import setup
    from neuron_customcall.cpp.extension import BuildExtension, NeuronLibrary

    setup(ext_modules=[NeuronLibrary("my_pkg", "my_ops", ["csrc/op.cpp"], ["csrc/shape.cpp"])],
          cmdclass={"build_ext": BuildExtension})

``pip wheel .`` (or ``pip install .``, ``python -m build``, an editable install) then compiles the
compute and shape sources with the builder ``custom_op.load`` uses and puts ``lib<library>.so``
inside the package, and the wheel is tagged for this platform. The installed package loads it
with ``custom_op.load_library``, so users of the wheel need no compiler and no sources.

Why not setuptools' own compiler driver: the library is not a Python extension module (no
``PyInit``), it links the emulated GpSimd runtime, and its objects share neuron-customcall's
object cache and build rules (signature checks, STACK_SIZE limits) with ``custom_op.load``.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

from setuptools import Extension
from setuptools.command.build_ext import build_ext

__all__ = ["BuildExtension", "NeuronLibrary"]


class NeuronLibrary(Extension):
    """A GpSimd custom-op library built as ``lib<library>.so`` inside package ``package``.

    Sources are paths relative to the project directory (where setup.py is), as for any
    setuptools extension; ``multicore`` and ``extra_cflags`` are ``custom_op.load``'s."""

    def __init__(self, package: str, library: str, compute_srcs: Sequence[str | os.PathLike[str]],
                 shape_srcs: Sequence[str | os.PathLike[str]], *, multicore: bool = False,
                 extra_cflags: Sequence[str] | None = None) -> None:
        compute, shape = [str(s) for s in compute_srcs], [str(s) for s in shape_srcs]
        super().__init__(f"{package}.lib{library}", sources=[*compute, *shape])
        self.library = library
        self.compute_srcs = compute
        self.shape_srcs = shape
        self.multicore = multicore
        self.extra_cflags = list(extra_cflags or [])


class BuildExtension(build_ext):
    """``build_ext`` that builds NeuronLibrary extensions with neuron-customcall's builder; any
    other extension builds as usual."""

    def get_ext_filename(self, fullname: str) -> str:
        # lib<name>.so, not lib<name>.cpython-311-x86_64-linux-gnu.so: load_library takes any path,
        # and the name says what the file is (distutils asks with the last component of the
        # name, setuptools with the full name).
        names = {n for ext in self.extensions if isinstance(ext, NeuronLibrary)
                 for n in (ext.name, ext.name.rsplit(".", 1)[-1])}
        if fullname in names:
            return str(Path(*fullname.split("."))) + ".so"
        return super().get_ext_filename(fullname)

    def build_extension(self, ext: Extension) -> None:
        if not isinstance(ext, NeuronLibrary):
            super().build_extension(ext)
            return
        from neuron_customcall.cpp import build as cpp_build

        root = Path.cwd()  # setuptools runs commands from the project directory
        # The object cache lives in build_temp, so a rebuild recompiles only changed sources.
        build_dir = Path(self.build_temp or tempfile.mkdtemp()) / "neuron" / ext.library
        request = cpp_build.make_request(
            ext.library,
            [root / s for s in ext.compute_srcs],
            [root / s for s in ext.shape_srcs],
            build_dir,
            multicore=ext.multicore,
            verbose=bool(self.verbose > 1),
            extra_cflags=ext.extra_cflags,
        )
        built = cpp_build.build(request)
        cpp_build.check_built(request, built)  # compute functions must return torch::Tensor
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, target)
