"""The same HLO on our emulator and on XLA:CPU: an MLP 784-4096-2048-10 at batch 64, inference and
one SGD training step (forward, backward, update; new parameters and the loss out).

The HLO comes from `jax.jit(...).lower(...)`; XLA:CPU runs it through jaxlib
(neuron_customcall.jax.xla_cpu), the emulator through our compiler. Both are timed end to end
from NumPy inputs to NumPy outputs (XLA:CPU: device_put, execute, copy out) and, the stricter
reference the targets use, XLA:CPU's execution alone with its inputs already on the device; median
of several runs after warm-up, XLA:CPU and emulator alternating run by run. Also timed: compiling the module (no cache), loading it from the compile cache
(a fresh process's first call: fingerprint, read, load) and the in-process memo hit.

Targets (issue 3): emulator <= 1.5x XLA:CPU on both graphs; compile <= 100 ms; cache hit <= 10 ms.
Run: ``python benchmarks/mlp_vs_xla_cpu.py [--runs N] [--quick] [--blas-threads N] [--json PATH]``;
prints a table and the ratios (``--json``: also the rows in benchmarks/_results.py's format). On a loaded machine OpenBLAS's worker threads spin for cores they do not get and the
emulator's matmuls slow down several times; ``--blas-threads 1`` shows the emulator without that.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def _blas_threads_from_argv(argv: list[str]) -> str | None:
    """--blas-threads N must act before NumPy loads OpenBLAS, so it is read ahead of argparse."""
    for k, arg in enumerate(argv):
        if arg == "--blas-threads" and k + 1 < len(argv):
            return argv[k + 1]
        if arg.startswith("--blas-threads="):
            return arg.split("=", 1)[1]
    return None


if (_threads := _blas_threads_from_argv(sys.argv[1:])) is not None:
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = _threads

import numpy as np  # noqa: E402

import hlo  # noqa: E402
from neuron_customcall import backend  # noqa: E402
from neuron_customcall.compiler import compile_module  # noqa: E402
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable  # noqa: E402
from benchmarks import _jax_mlp  # noqa: E402
from benchmarks._results import Row as ResultRow, ratio_target, write_json  # noqa: E402

SIZES = (784, 4096, 2048, 10)
BATCH = 64
TARGET_RUN_RATIO = 1.5
TARGET_COMPILE_MS = 100.0
TARGET_CACHE_HIT_MS = 10.0


def _graphs(sizes: tuple[int, ...], batch: int) -> dict[str, tuple[bytes, list[np.ndarray]]]:
    """name -> (serialized HLO module, its inputs in parameter order)."""
    import jax

    infer, train_step = _jax_mlp.functions()
    params = _jax_mlp.params(sizes)
    x, y = _jax_mlp.batch(sizes, batch, seed=1)
    flat = [a for layer in params for a in layer]
    out = {}
    for name, fn, args in (("inference", infer, (params, x)), ("training step", train_step, (params, x, y))):
        lowered = jax.jit(fn).lower(*args)
        out[name] = (lowered.compiler_ir("hlo").as_serialized_hlo_module_proto(), flat + [x] + ([y] if name != "inference" else []))
    return out


def _paired_median_ms(a: Callable[[], object], b: Callable[[], object], runs: int,
                      warmup: int = 2) -> tuple[float, float, float]:
    """Medians of `a` and `b` timed alternately, so that load from other processes on a shared
    machine falls on both sides of the ratio alike, and the ratio of their fastest runs (what
    each achieves when the machine is quiet)."""
    for _ in range(warmup):
        a()
        b()
    ta, tb = [], []
    for _ in range(runs):
        for fn, times in ((a, ta), (b, tb)):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return statistics.median(ta) * 1e3, statistics.median(tb) * 1e3, min(tb) / min(ta)


def _median_ms(fn: Callable[[], object], runs: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


@dataclass
class Row:
    graph: str
    xla_ms: float       # XLA:CPU from NumPy to NumPy (transfers included, as for the emulator)
    xla_exec_ms: float  # XLA:CPU execution alone, inputs already on the device: the strict reference
    emu_ms: float
    best_ratio: float   # emulator's fastest run / XLA:CPU execution's fastest run
    compile_ms: float
    cache_hit_ms: float
    memo_hit_us: float
    max_abs_diff: float


def measure(name: str, proto: bytes, inputs: list[np.ndarray], runs: int) -> Row:
    import emulator

    xla = XlaCpuExecutable(proto)
    module = hlo.load(proto)
    artifact = compile_module(module)
    exe = emulator.load_artifact(artifact)
    want, got = xla.run(inputs), exe.run(inputs)
    diff = max(float(np.max(np.abs(w - g))) if w.size else 0.0 for w, g in zip(want, got))

    xla_ms, emu_ms, _ = _paired_median_ms(lambda: xla.run(inputs), lambda: exe.run(inputs), runs)
    buffers = xla.put(inputs)
    xla_exec_ms, _, best_ratio = _paired_median_ms(lambda: [o.block_until_ready() for o in xla.execute(buffers)],
                                       lambda: exe.run(inputs), runs)
    compile_ms = _median_ms(lambda: compile_module(hlo.load(proto)), max(3, runs // 2), warmup=1)

    with tempfile.TemporaryDirectory() as cache_dir:
        backend.clear_memo()
        backend.compile_cached(proto, cache=cache_dir)  # installs the entry

        def disk_hit() -> None:
            backend.clear_memo()  # what a new process sees: no executable in memory yet
            backend.compile_cached(proto, cache=cache_dir)

        cache_hit_ms = _median_ms(disk_hit, max(3, runs // 2), warmup=1)
        memo_hit_us = _median_ms(lambda: backend.compile_cached(proto, cache=cache_dir), 50) * 1e3
    return Row(name, xla_ms, xla_exec_ms, emu_ms, best_ratio, compile_ms, cache_hit_ms, memo_hit_us, diff)


def _verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def report(rows: list[Row]) -> str:
    head = (f"{'graph':<14} {'XLA:CPU ms':>10} {'XLA exec ms':>11} {'emulator ms':>11} {'ratio':>6} {'ratio e2e':>9} "
            f"{'compile ms':>10} {'cache hit ms':>12} {'memo hit us':>11} {'max |diff|':>10}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.graph:<14} {r.xla_ms:>10.2f} {r.xla_exec_ms:>11.2f} {r.emu_ms:>11.2f} "
                     f"{r.emu_ms / r.xla_exec_ms:>6.2f} {r.emu_ms / r.xla_ms:>9.2f} {r.compile_ms:>10.2f} "
                     f"{r.cache_hit_ms:>12.2f} {r.memo_hit_us:>11.1f} {r.max_abs_diff:>10.2e}")
    lines += ["", "ratio = emulator / XLA:CPU execution alone (inputs already on the device); ratio e2e = against "
              "XLA:CPU from NumPy inputs to NumPy outputs, as the emulator is timed", ""]
    for r in rows:
        ratio = r.emu_ms / r.xla_exec_ms
        lines.append(f"{r.graph}: emulator/XLA:CPU {ratio:.2f}x (target <= {TARGET_RUN_RATIO}x: "
                     f"{_verdict(ratio <= TARGET_RUN_RATIO)}; fastest runs {r.best_ratio:.2f}x), compile {r.compile_ms:.1f} ms "
                     f"(<= {TARGET_COMPILE_MS:.0f}: {_verdict(r.compile_ms <= TARGET_COMPILE_MS)}), cache hit "
                     f"{r.cache_hit_ms:.2f} ms (<= {TARGET_CACHE_HIT_MS:.0f}: "
                     f"{_verdict(r.cache_hit_ms <= TARGET_CACHE_HIT_MS)})")
    return "\n".join(lines)


def result_rows(rows: list[Row], sizes: tuple[int, ...]) -> list[ResultRow]:
    """The shared result format: per graph, the run against XLA:CPU execution alone (the target)
    and end to end (no target), compile and cache-hit times against their absolute targets."""
    suite = f"MLP {'-'.join(map(str, sizes))}, batch {BATCH}: emulator vs XLA:CPU (issue 3)"
    out = []
    for r in rows:
        text, met = ratio_target(r.emu_ms, r.xla_exec_ms, TARGET_RUN_RATIO)
        out += [
            ResultRow(suite, f"{r.graph}: run", r.emu_ms / 1e3, "XLA:CPU execution alone", r.xla_exec_ms / 1e3,
                      text, met),
            ResultRow(suite, f"{r.graph}: run, NumPy in and out", r.emu_ms / 1e3, "XLA:CPU NumPy in and out",
                      r.xla_ms / 1e3),
            ResultRow(suite, f"{r.graph}: compile", r.compile_ms / 1e3, "(absolute target)", None,
                      f"<= {TARGET_COMPILE_MS:g} ms", r.compile_ms <= TARGET_COMPILE_MS),
            ResultRow(suite, f"{r.graph}: compile-cache hit", r.cache_hit_ms / 1e3, "(absolute target)", None,
                      f"<= {TARGET_CACHE_HIT_MS:g} ms", r.cache_hit_ms <= TARGET_CACHE_HIT_MS),
        ]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="timed runs per measurement (median reported)")
    parser.add_argument("--quick", action="store_true", help="a 10x smaller MLP and 5 runs, to check the script")
    parser.add_argument("--blas-threads", type=int, help="threads of NumPy's BLAS (the emulator's matmuls); on a "
                        "machine shared with other work, 1 avoids OpenBLAS's spinning threads losing their cores")
    parser.add_argument("--json", metavar="PATH", help="also write the rows in the shared result format")
    args = parser.parse_args(argv)
    sizes, runs = (SIZES, args.runs) if not args.quick else ((78, 409, 204, 10), 5)
    graphs = _graphs(sizes, BATCH)
    rows = [measure(name, proto, inputs, runs) for name, (proto, inputs) in graphs.items()]
    blas = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    print(f"MLP {'-'.join(map(str, sizes))}, batch {BATCH}, float32; median of {runs} runs after warm-up; "
          f"BLAS threads: {blas}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(report(rows))
    write_json(args.json, result_rows(rows, sizes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
