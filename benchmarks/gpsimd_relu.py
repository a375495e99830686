"""GpSimd C++ custom ops: build time and emulated ReLU speed.

1. Build time of the ReLU custom-op library (custom_op.load, cold cache) against
   torch.utils.cpp_extension.load of the equivalent plain-PyTorch CPU extension (target: >= 10x).
2. Emulated ReLU on a 4096x2048 fp32 tensor, per accessor variant (element-wise, stream, TCM,
   multicore TCM), called as torch.ops.<lib>.<op> on CPU tensors, against NumPy's
   ``np.maximum(x, 0)`` (target: <= 3x for the TCM and multicore variants).

Run: python benchmarks/gpsimd_relu.py [--repeat N] [--quick] [--json PATH]. Prints two tables and the
ratios (``--json``: also the rows in benchmarks/_results.py's format).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from neuron_customcall import custom_op  # noqa: E402
from benchmarks._results import Row, ratio_target, write_json  # noqa: E402

BUILD_SUITE = "GpSimd C++ ReLU library build: custom_op.load vs torch.utils.cpp_extension.load (issue 5)"
RUN_SUITE = "GpSimd ReLU 4096x2048 fp32 on the emulator vs NumPy (issue 5)"
BUILD_AT_MOST = 1 / 10     # our build / torch's
RUN_AT_MOST = 3.0          # our torch.ops call / np.maximum, for the TCM and multicore variants
RUN_TARGETED = ("TCM accessor", "multicore TCM (8 cores)")

# The ReLU kernels in the tutorials' style, shared with the tests.
KERNELS = Path(__file__).resolve().parents[1] / "tests" / "neuron_customcall" / "cpp" / "kernels"
VARIANT_SOURCES = [KERNELS / "relu.cpp", KERNELS / "relu_stream.cpp", KERNELS / "relu_tcm.cpp"]

# The same ReLU as a plain PyTorch CPU extension, as in the tutorial's CPU example: relu.cpp is
# valid libtorch code as it stands; only the registration differs.
TORCH_REGISTRATION = r"""
TORCH_LIBRARY(bench_relu_cpu, m) {
    m.def("relu_forward", &relu_forward);
    m.def("relu_backward", &relu_backward);
}
"""


def write(directory: Path, files: dict[str, str]) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, text in files.items():
        paths[name] = directory / name
        paths[name].write_text(text)
    return paths


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def best_time(fn: Callable[[], object], repeat: int) -> float:
    """Best of `repeat` runs after a warm-up (worker start, arena growth, page faults): the
    machine is shared, and the minimum is the least disturbed measurement of each side."""
    fn()
    return min(timed(fn) for _ in range(repeat))


def timed_build(fn: Callable[[], object]) -> tuple[float, float]:
    """Wall seconds and compiler CPU seconds (user + system of the child processes) of a build;
    the CPU figure does not depend on how busy the (shared) machine is."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = timed(fn)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def build_benchmark(root: Path) -> dict[str, tuple[float, float]]:
    """(wall, CPU) seconds for: the first build on a machine (empty shared cache: the runtime
    object and the precompiled prelude are built too), a library build (cold build directory,
    shared cache warm; best of three), and torch.utils.cpp_extension.load of the plain-PyTorch
    extension. Our library holds the forward and backward kernels plus the stream and TCM
    variants (four sources), so it is more code than the extension's forward and backward."""
    src = write(root / "src", {"relu_cpu.cpp": (KERNELS / "relu.cpp").read_text() + TORCH_REGISTRATION})
    compute, shape = VARIANT_SOURCES, [KERNELS / "relu_shape.cpp"]
    os.environ["NEURON_CUSTOMCALL_CPP_CACHE"] = str(root / "shared-cache")
    first = timed_build(lambda: custom_op.load("relu", compute, shape, build_directory=root / "neuron-first"))
    usual = min(timed_build(lambda k=k: custom_op.load("relu", compute, shape, build_directory=root / f"neuron{k}"))
                for k in range(3))
    from torch.utils import cpp_extension

    theirs = timed_build(lambda: cpp_extension.load(name="librelu_cpu", sources=[str(src["relu_cpu.cpp"])],
                                                    is_python_module=False, build_directory=str(root / "src"),
                                                    verbose=False))
    return {"first": first, "usual": usual, "torch": theirs}


def runtime_benchmark(root: Path, repeat: int) -> list[tuple[str, float, float]]:
    custom_op.load("relu", VARIANT_SOURCES, [KERNELS / "relu_shape.cpp"], build_directory=root / "variants")
    custom_op.load("relu_mc", [KERNELS / "relu_multicore.cpp"], [KERNELS / "relu_multicore_shape.cpp"],
                   build_directory=root / "multicore", multicore=True)
    x = torch.randn(4096, 2048)
    expected = torch.relu(x)
    variants = [
        ("element-wise accessor", "relu_ops", "relu_forward"),
        ("stream accessors", "relu_ops", "relu_stream"),
        ("TCM accessor", "relu_ops", "relu_tcm"),
        ("multicore TCM (8 cores)", "relu_mc", "relu_forward"),
    ]
    rows = []
    for label, lib, name in variants:
        op = getattr(getattr(torch.ops, lib), name)
        assert torch.equal(op(x), expected), label
        engine = []

        def call() -> None:
            op(x)
            engine.append(custom_op.last_run(lib, name).seconds)

        seconds = best_time(call, repeat)
        last = custom_op.last_run(lib, name)
        rows.append((label, seconds, min(engine), last.cost.seconds))
    return rows


def result_rows(builds: dict[str, tuple[float, float]], numpy_s: float,
                rows: list[tuple[str, float, float, float]]) -> list[Row]:
    """The shared result format: the usual build is held to the target, the first build on a
    machine and compiler CPU time are reported beside it; each variant against NumPy."""
    torch_wall, torch_cpu = builds["torch"]
    out = [Row(BUILD_SUITE, "library build, shared cache warm (usual)", builds["usual"][0],
               "cpp_extension.load", torch_wall, *ratio_target(builds["usual"][0], torch_wall, BUILD_AT_MOST)),
           Row(BUILD_SUITE, "library build, first on this machine", builds["first"][0], "cpp_extension.load",
               torch_wall),
           Row(BUILD_SUITE, "compiler CPU seconds, usual build", builds["usual"][1], "cpp_extension.load",
               torch_cpu)]
    for label, seconds, _engine, _model in rows:
        target = ratio_target(seconds, numpy_s, RUN_AT_MOST) if label in RUN_TARGETED else ("", None)
        out.append(Row(RUN_SUITE, f"{label} (torch.ops call)", seconds, "np.maximum(x, 0)", numpy_s, *target))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="3 repeats, to check the script")
    parser.add_argument("--json", metavar="PATH", help="also write the rows in the shared result format")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeat = 3
    with tempfile.TemporaryDirectory(prefix="gpsimd-bench-") as tmp:
        root = Path(tmp)
        builds = build_benchmark(root)
        torch_wall, torch_cpu = builds["torch"]
        print("Build of the ReLU library (empty build directory): wall seconds, compiler CPU seconds")
        print(f"  {'torch.utils.cpp_extension.load (CPU extension)':50s} {torch_wall:6.2f} s {torch_cpu:6.2f} s")
        for key, label in (("usual", "custom_op.load, runtime + prelude cached (usual)"),
                           ("first", "custom_op.load, first build on this machine")):
            wall, cpu = builds[key]
            print(f"  {label:50s} {wall:6.2f} s {cpu:6.2f} s   {torch_wall / wall:5.1f}x faster "
                  f"(CPU: {torch_cpu / cpu:5.1f}x)")
        print("  target: >= 10x\n")

        x = np.random.default_rng(0).standard_normal((4096, 2048), dtype=np.float32)
        numpy_s = best_time(lambda: np.maximum(x, 0), args.repeat)
        rows = runtime_benchmark(root, args.repeat)
        print("ReLU on 4096x2048 fp32: best wall time of a torch.ops call on CPU tensors (shape")
        print("function, input copy, kernel, zero-copy output); 'engine' is the worker round trip")
        print("alone; 'model' is the cost model's estimate of the time on a real GpSimd engine")
        print(f"  {'variant':26s} {'torch.ops':>10s} {'vs NumPy':>9s} {'engine':>9s} {'vs NumPy':>9s} {'model':>10s}")
        print(f"  {'np.maximum(x, 0)':26s} {numpy_s * 1e3:8.1f}ms {1.0:8.2f}x")
        for label, seconds, engine, device in rows:
            print(f"  {label:26s} {seconds * 1e3:8.1f}ms {seconds / numpy_s:8.2f}x {engine * 1e3:7.1f}ms"
                  f" {engine / numpy_s:8.2f}x {device * 1e3:8.2f}ms")
        print("  target: <= 3x NumPy for the TCM and multicore variants\n")
        tiny = torch.randn(1, 1)
        overhead = best_time(lambda: torch.ops.relu_ops.relu_tcm(tiny), 50)
        print(f"Per-call overhead (TCM ReLU of a 1x1 tensor): {overhead * 1e6:.0f} us per torch.ops call")
        write_json(args.json, result_rows(builds, numpy_s, rows))


if __name__ == "__main__":
    main()
