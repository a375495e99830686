"""Neuron C++ custom operators: build (``load``) or load (``load_library``) a GpSimd custom-op
library and call its ops as ``torch.ops.<lib>.<op>``.

    from neuron_customcall import custom_op
    custom_op.load(name="relu", compute_srcs=["relu.cpp"], shape_srcs=["shape.cpp"])
    y = torch.ops.my_ops.relu_forward(x)

On CPU tensors an op runs on the emulated GpSimd engine; on meta or fake tensors it runs its shape
function. ``<lib>`` comes from ``NEURON_LIBRARY(<lib>, m)``, not from ``name``.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path
from typing import Sequence

from emulator.gpsimd import LibraryDescriptor, RunResult
from neuron_customcall.cpp import build as _build
from neuron_customcall.cpp import loader as _loader
from neuron_customcall.cpp import param_names as _param_names
from neuron_customcall.cpp.errors import BuildError

log = logging.getLogger(__name__)

__all__ = ["BuildError", "descriptor", "last_run", "library_path", "load", "load_library"]


def load(
    name: str,
    compute_srcs: Sequence[str | os.PathLike[str]],
    shape_srcs: Sequence[str | os.PathLike[str]],
    build_directory: str | os.PathLike[str] | None = None,
    multicore: bool = False,
    verbose: bool = False,
    extra_cflags: Sequence[str] | None = None,
) -> Path:
    """Builds lib<name>.so (reusing cached objects) and loads it; returns the library's path."""
    request = _build.make_request(name, compute_srcs, shape_srcs, build_directory, multicore,
                                  verbose, extra_cflags)
    path = _build.build(request)
    # The compute functions' return types are checked by the compiler once the library's
    # registration table names them (neuron_customcall/cpp/returns.py).
    loaded = _loader.load(path, check=lambda desc: _build.check_compute_returns(
        request, [op.compute for op in desc.ops]))
    # Schema argument names from the compute functions' definitions (cpp/param_names.py).
    names = {op.name: _param_names.parameter_names(request.compute_srcs, op.compute, len(op.args))
             for op in loaded.descriptor.ops}
    _register(loaded, names)
    return path


def load_library(path: str | os.PathLike[str]) -> LibraryDescriptor:
    """Loads a library built earlier (in this process or another) and registers its ops as
    torch.ops.<lib>.<op> when torch is installed (a JAX-only install calls them through
    neuron_customcall.jax.cpp_call, so torch is imported only here and only if present)."""
    return _register(_loader.load(path))


def _register(loaded: _loader.LoadedLibrary, arg_names: dict[str, tuple[str, ...]] | None = None) -> LibraryDescriptor:
    if importlib.util.find_spec("torch") is not None:
        from neuron_customcall.cpp import torch_ops
        torch_ops.register(loaded, arg_names)
    else:
        log.debug("torch is not installed: %s's ops are not registered as torch.ops", loaded.descriptor.library)
    return loaded.descriptor


def descriptor(library: str) -> LibraryDescriptor:
    """The framework-neutral description of a loaded library (serialisable as JSON)."""
    return _loader.get(library).descriptor


def last_run(library: str, op: str) -> RunResult:
    """The latest execution of torch.ops.<library>.<op> in this process: its counters, printf
    output, core count and cost-model estimate (``.cost.cycles``, ``.cost.seconds``)."""
    runs = _loader.get(library).last_runs
    if op not in runs:
        raise KeyError(f"op {library}::{op} has not run in this process")
    return runs[op]


def library_path(library: str) -> Path:
    """The content-addressed file of a loaded library (what its worker runs)."""
    return _loader.get(library).host.path
