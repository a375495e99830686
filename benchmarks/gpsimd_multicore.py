"""The performance tutorial's three ReLUs on the emulated GpSimd engine (issue 14): the multicore
kernel's real parallelism, and the cost model's ratios against AWS's published trn1 figures.

The variants are examples/mlp_perf's (element-wise accessor, TCM accessor, TCM on 8 cores), run
on the tutorial's activations (batch 32: 32x4096 and 32x2048 fp32, one of each per inference)
through the call path of a compiled graph (`emulator.gpsimd.call.OpCall`). Per variant:

* measured: wall time per inference (both ReLUs) and the GpSimd worker's CPU time over it; for
  the multicore kernel, worker CPU / worker wall is how many host cores its 8 emulated cores
  really used (at most the host's core count). The worker's polling for the next call is off
  while it is measured (the host asks for no poll: `control.worker_spin` is 0 in this process):
  on an idle host the worker polls between calls, and that CPU is not the kernel's (it read as
  3-9 "cores" on this 2-core host);
* estimated: the GpSimd cost model's device time for the same two ReLUs (docs/cost-model.md);
* published: AWS's customop-mlp-perf-opt tutorial prints inference throughputs measured on trn1
  of 8.10 (element-wise), 220.74 (TCM) and 269.94 (multicore) iterations per second for the whole
  784-4096-2048-10 MLP, dense layers included. Only ratios are compared: the estimate covers the
  ReLUs alone, so its ratios are the ReLUs' and the published ones the whole model's, which the
  dense layers (the same in every variant) pull towards 1.

Run: ``python benchmarks/gpsimd_multicore.py [--quick] [--json PATH]``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._results import Row, write_json  # noqa: E402
from benchmarks.gpsimd_call import task_cpu_ns  # noqa: E402
from emulator.gpsimd import TensorSpec, control  # noqa: E402
from emulator.gpsimd.call import OpCall  # noqa: E402
from emulator.gpsimd.library import HostLibrary  # noqa: E402

SUITE = "GpSimd ReLU variants of the performance tutorial: emulator and cost model vs published trn1 (issue 14)"
PERF = ROOT / "examples" / "mlp_perf"
#: (variant, title, compute source, multicore, published trn1 inferences per second)
VARIANTS = (
    ("elementwise", "element-wise accessor", ROOT / "examples" / "mlp_training" / "relu.cpp", False, 8.098649744235592),
    ("tcm", "TCM accessor", PERF / "relu_tcm.cpp", False, 220.73800131604054),
    ("multicore", "TCM on 8 cores", PERF / "relu_multicore.cpp", True, 269.936119707143),
)
ACTIVATIONS = ((32, 4096), (32, 2048))


def build(name: str, source: Path, multicore: bool) -> Path:
    from neuron_customcall.cpp import build as cpp_build

    directory = Path(os.environ.get("TMPDIR", "/tmp")) / f"neuron_customcall_bench_{os.getuid()}" / f"relu_{name}"
    request = cpp_build.make_request(f"relu_{name}", [source], [PERF / f"shape_{name}.cpp"], directory, multicore,
                                     False, [])
    return cpp_build.build(request)


def measure(name: str, source: Path, multicore: bool, iterations: int) -> dict[str, float]:
    control.worker_spin = lambda: 0.0  # the worker sleeps between calls: its CPU is the kernels' (see above)
    path = build(name, source, multicore)
    host = HostLibrary(path)
    op = host.descriptor.op("relu_forward")
    calls = [OpCall(str(path), op, [("tensor", None)], TensorSpec("float32", shape)) for shape in ACTIVATIONS]
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(shape, dtype=np.float32) for shape in ACTIVATIONS]
    for call, x in zip(calls, inputs):
        if not np.array_equal(call(x), np.maximum(x, 0)):
            raise SystemExit(f"{name}: the ReLU's result differs from NumPy's")
    worker = calls[0].runner._worker
    assert worker is not None
    walls, worker_walls, cpu0 = [], 0.0, task_cpu_ns(worker.proc.pid)
    for _ in range(iterations):
        start = time.perf_counter()
        for call, x in zip(calls, inputs):
            call(x)
            worker_walls += call.last.seconds
        walls.append(time.perf_counter() - start)
    worker_cpu = (task_cpu_ns(worker.proc.pid) - cpu0) / 1e9
    estimate = 0.0
    for call, x in zip(calls, inputs):
        call(x)
        estimate += call.last.cost.seconds
    return {"wall": statistics.median(walls), "worker_cpu": worker_cpu / iterations,
            "parallelism": worker_cpu / worker_walls if worker_walls else 0.0, "estimate": estimate}


def implied_relu_seconds(elementwise: float, tcm: float, multicore: float) -> dict[str, float]:
    """The dense layers' and each variant's ReLU seconds per inference that the published
    throughputs imply, if the multicore ReLU takes 1/8 of the TCM one (what they can not say by
    themselves: three figures, four unknowns)."""
    tcm_relu = (1 / tcm - 1 / multicore) * 8 / 7
    dense = 1 / tcm - tcm_relu
    return {"dense": dense, "elementwise": 1 / elementwise - dense, "tcm": tcm_relu, "multicore": tcm_relu / 8}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="5 iterations, to check the script")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    if args.quick:
        args.iterations = 5
    load = os.getloadavg()[0]
    results = {name: measure(name, src, mc, args.iterations) for name, _, src, mc, _ in VARIANTS}
    base = results["elementwise"]
    published_base = VARIANTS[0][4]
    print(f"ReLUs of one inference (32x4096 + 32x2048 fp32), {args.iterations} iterations; load {load:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after; {os.cpu_count()} host CPUs")
    print(f"  {'variant':22s} {'emulator wall':>13s} {'worker CPU':>11s} {'cores used':>10s} {'estimate':>10s}"
          f" {'speed-up: emulator':>19s} {'estimate':>9s} {'published':>10s}")
    rows = []
    for name, title, _, _, published in VARIANTS:
        r = results[name]
        print(f"  {title:22s} {r['wall'] * 1e3:10.2f} ms {r['worker_cpu'] * 1e3:8.2f} ms {r['parallelism']:10.2f} "
              f"{r['estimate'] * 1e6:7.1f} us {base['wall'] / r['wall']:18.1f}x {base['estimate'] / r['estimate']:8.1f}x "
              f"{published / published_base:9.1f}x")
        rows.append(Row(SUITE, f"{title}: ReLUs of one inference, emulator wall vs cost-model trn1 estimate",
                        r["wall"], "cost model (trn1, ReLUs only)", r["estimate"]))
    print("  speed-ups are over the element-wise variant; 'published' is AWS's trn1 whole-model throughput")
    print(f"  (customop-mlp-perf-opt: {', '.join(f'{v[4]:.2f}' for v in VARIANTS)} it/s), dense layers included")
    implied = implied_relu_seconds(*(v[4] for v in VARIANTS))
    print("  If the multicore ReLU took exactly 1/8 of the TCM one on trn1 (an assumption: 8 cores, balanced), the")
    print(f"  published figures imply dense layers of {implied['dense'] * 1e3:.2f} ms and ReLUs of "
          + ", ".join(f"{implied[name] * 1e3:.3f} ms" for name, *_ in VARIANTS)
          + "; the cost model's estimates are "
          + ", ".join(f"{implied[name] / results[name]['estimate']:.0f}x" for name, *_ in VARIANTS) + " lower")
    write_json(args.json, rows)


if __name__ == "__main__":
    main()
