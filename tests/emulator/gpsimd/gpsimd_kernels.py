"""Builds the test kernels under kernels/ once per process into a shared, content-addressed
build cache (rebuilds across test runs only compile what changed)."""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np

from emulator.gpsimd import GpSimdRunner, HostLibrary, TensorSpec
from emulator.gpsimd.runner import TensorValue
from neuron_customcall.cpp import build

KERNELS = Path(__file__).parent / "kernels"
# One build directory per checkout: worktrees of the same user built into one directory, each
# rebuilding its libraries with its own runtime, so one tree's tests could load another's.
_CHECKOUT = hashlib.sha256(str(Path(__file__).resolve().parents[3]).encode()).hexdigest()[:10]
BUILD_ROOT = Path(tempfile.gettempdir()) / f"neuron_customcall_tests_{os.getuid()}_{_CHECKOUT}"
# Compute sources of a library besides kernels/<name>.cpp.
MORE_SOURCES = {"accessor_ops": ["accessor_ops_rows.cpp"]}


@functools.lru_cache(maxsize=None)
def library(name: str, multicore: bool = False, flags: tuple[str, ...] = ()) -> Path:
    request = build.make_request(
        name, [KERNELS / f"{name}.cpp", *(KERNELS / src for src in MORE_SOURCES.get(name, ()))],
        [KERNELS / f"{name}_shape.cpp"],
        BUILD_ROOT / f"{name}{'_mc' if multicore else ''}{'_'.join(flags).replace('=', '')}",
        multicore, False, list(flags),
    )
    return build.build(request)


@functools.lru_cache(maxsize=None)
def loaded(name: str, multicore: bool = False, flags: tuple[str, ...] = ()) -> tuple[HostLibrary, GpSimdRunner]:
    path = library(name, multicore, flags)
    runner = GpSimdRunner(path, timeout=60)
    return HostLibrary(path, runner), runner


def tensor(array: np.ndarray) -> TensorValue:
    names = {np.dtype(np.float32): "float32", np.dtype(np.int32): "int32"}
    array = np.ascontiguousarray(array)
    return TensorValue(TensorSpec(names[array.dtype], array.shape), array)


def run(name: str, op_name: str, *values, multicore: bool = False, flags: tuple[str, ...] = (),
        timeout: float | None = None):
    host, runner = loaded(name, multicore, flags)
    op = host.descriptor.op(op_name)
    specs = [v.spec if isinstance(v, TensorValue) else v for v in values]
    out = host.shape(op, specs)
    return runner.run(op, list(values), out, timeout=timeout)
