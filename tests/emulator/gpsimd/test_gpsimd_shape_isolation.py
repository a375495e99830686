"""Shape functions and static initialisers run in the library's worker, never in the host: a crash,
an abort, an uncaught exception or a hang is a Python exception naming the op (or the library),
the test process survives, and the next call works. Shape results are cached per signature."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from emulator.gpsimd import (
    GpSimdRunner,
    HostLibrary,
    KernelCrash,
    LibraryError,
    ShapeFunctionError,
    TensorSpec,
)
from emulator.gpsimd.errors import ShapeFunctionCrash, ShapeFunctionTimeout
from gpsimd_kernels import library, tensor

SPEC = TensorSpec("float32", (16,))
X = np.arange(16, dtype=np.float32)


@functools.lru_cache(maxsize=None)
def shape_errors() -> HostLibrary:
    path = library("shape_errors")
    return HostLibrary(path, GpSimdRunner(path, timeout=60), shape_timeout=1.0)


def assert_the_library_still_works(host: HostLibrary) -> None:
    op = host.descriptor.op("first_n")
    n = int(np.random.default_rng().integers(1, 16))  # a signature not cached yet
    out = host.shape(op, [SPEC, n])
    assert out == TensorSpec("float32", (n,))
    result = host.runner.run(op, [tensor(X), n], out)
    assert np.array_equal(result.output.view(np.float32), X[:n])


@pytest.mark.parametrize("op, signal", [("segv", "SIGSEGV"), ("abort_op", "SIGABRT")])
def test_a_crashing_shape_function_raises_and_the_host_survives(op: str, signal: str) -> None:
    host = shape_errors()
    with pytest.raises(ShapeFunctionCrash, match=f"shape function of op '{op}' \\(library 'shape_errors'\\) "
                                                 f"crashed its GpSimd worker \\({signal}\\)") as info:
        host.shape(host.descriptor.op(op), [SPEC])
    assert info.value.kind == "crash"
    assert isinstance(info.value, ShapeFunctionError) and isinstance(info.value, KernelCrash)
    assert_the_library_still_works(host)


@pytest.mark.parametrize("op, words", [("throws", "no shape for you"),
                                       ("throws_int", "a C++ exception not derived from std::exception")])
def test_a_throwing_shape_function_is_an_error_naming_the_op(op: str, words: str) -> None:
    host = shape_errors()
    with pytest.raises(ShapeFunctionError, match=re.escape(f"shape function of op '{op}': {words}")) as info:
        host.shape(host.descriptor.op(op), [SPEC])
    assert info.value.kind == "other"
    assert_the_library_still_works(host)


def test_a_hanging_shape_function_is_killed_after_its_time_limit() -> None:
    host = shape_errors()
    with pytest.raises(ShapeFunctionTimeout, match="shape function of op 'hang' .* ran past its time limit of 1 s"):
        host.shape(host.descriptor.op("hang"), [SPEC])
    assert_the_library_still_works(host)


def test_the_shape_time_limit_comes_from_the_environment() -> None:
    code = "from emulator.gpsimd import runner; print(runner.DEFAULT_SHAPE_TIMEOUT)"
    env = {**os.environ, "NEURON_CUSTOMCALL_GPSIMD_SHAPE_TIMEOUT": "0.5"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=Path(__file__).resolve().parents[3], timeout=60)
    assert out.stdout.strip() == "0.5", out.stderr


def test_shape_results_are_cached_per_signature() -> None:
    host = shape_errors()
    op = host.descriptor.op("first_n")
    spec = TensorSpec("float32", (1000 + 7,))
    before = host.runner.requests["shape"]
    assert host.shape(op, [spec, 3]) == TensorSpec("float32", (3,))
    assert host.runner.requests["shape"] == before + 1
    assert host.shape(op, [spec, 3]) == TensorSpec("float32", (3,))  # no round trip
    assert host.runner.requests["shape"] == before + 1
    assert host.shape(op, [spec, 4]) == TensorSpec("float32", (4,))  # another scalar: another call
    assert host.shape(op, [TensorSpec("float32", (1000 + 8,)), 3]) == TensorSpec("float32", (3,))
    assert host.runner.requests["shape"] == before + 3


def test_errors_are_not_cached() -> None:
    host = shape_errors()
    op = host.descriptor.op("throws")
    before = host.runner.requests["shape"]
    for _ in range(2):
        with pytest.raises(ShapeFunctionError):
            host.shape(op, [SPEC])
    assert host.runner.requests["shape"] == before + 2


@pytest.mark.parametrize("flag, signal", [("-DINIT_SEGV", "SIGSEGV"), ("-DINIT_THROW", "SIGABRT")])
def test_a_crashing_static_initialiser_is_an_error_naming_the_library(flag: str, signal: str) -> None:
    path = library("init_crash", flags=(flag,))
    with pytest.raises(LibraryError, match=f"GpSimd library {path.name} crashed while loading \\({signal}.*"
                                           "static initialiser \\(global constructor\\)"):
        HostLibrary(path, GpSimdRunner(path, timeout=60))
    assert_the_library_still_works(shape_errors())


def test_a_throwing_static_initialiser_shows_the_exception() -> None:
    path = library("init_crash", flags=("-DINIT_THROW",))
    with pytest.raises(LibraryError, match="a global constructor threw"):
        HostLibrary(path, GpSimdRunner(path, timeout=60))


def test_a_hanging_static_initialiser_is_killed_after_the_load_time_limit() -> None:
    path = library("init_crash", flags=("-DINIT_HANG",))
    with pytest.raises(LibraryError, match=f"GpSimd library {path.name} did not finish loading within 1 s"):
        HostLibrary(path, GpSimdRunner(path, timeout=60, load_timeout=1.0))
    assert_the_library_still_works(shape_errors())


def test_the_host_process_never_loads_a_library() -> None:
    path = library("shape_errors")
    shape_errors()
    with open("/proc/self/maps") as maps:
        assert path.name not in maps.read()


def test_the_shape_cache_is_bounded() -> None:
    from emulator.gpsimd.shape_cache import ShapeCache

    cache = ShapeCache(capacity=2)
    for n in range(3):
        cache.put(str(n), TensorSpec("float32", (n,)))
    assert len(cache) == 2 and cache.get("0") is None and cache.get("2") == TensorSpec("float32", (2,))
