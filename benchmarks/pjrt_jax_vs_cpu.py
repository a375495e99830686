"""Plain `jax.jit` on the neuron PJRT device against `jax.jit` on XLA:CPU, in one process: the MLP
784-4096-2048-10 at batch 64 (inference, and one SGD training step whose parameters stay on the
device from step to step), end to end, and the plugin's fixed cost per execute of a tiny graph
(device arrays in and out; and NumPy in and out, transfers included: zero-copy on both devices).

End to end means what a training loop sees: the batch goes from NumPy to the device, the jitted
step runs, the loss comes back as a Python float (inference: the softmax as a NumPy array). Each
measurement alternates the two devices run by run and reports medians of wall time and of this
process's CPU time (time.process_time: threads included), so that load from other processes on a
shared machine falls on both sides alike; the targets compare CPU time (issue 11: <= 1.3x).

Run: ``python benchmarks/pjrt_jax_vs_cpu.py [--runs N] [--quick] [--json PATH]``; needs the package
installed (the plugin is found through its jax_plugins entry point).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

os.environ["JAX_PLATFORMS"] = "neuron,cpu"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

from benchmarks import _jax_mlp  # noqa: E402
from benchmarks._results import Row, ratio_target, write_json  # noqa: E402

SIZES = (784, 4096, 2048, 10)
BATCH = 64
TARGET_RATIO = 1.3
SUITE = "plain jax.jit: neuron PJRT device vs XLA:CPU (issue 11)"


def _alternating(a: Callable[[], object], b: Callable[[], object], runs: int, warmup: int = 2
                 ) -> tuple[tuple[float, float], tuple[float, float]]:
    """(wall, cpu) medians in seconds of `a` and of `b`, timed alternately."""
    for _ in range(warmup):
        a()
        b()
    times: dict[int, tuple[list[float], list[float]]] = {0: ([], []), 1: ([], [])}
    for _ in range(runs):
        for k, fn in enumerate((a, b)):
            w0, c0 = time.perf_counter(), time.process_time()
            fn()
            times[k][1].append(time.process_time() - c0)
            times[k][0].append(time.perf_counter() - w0)
    return tuple((statistics.median(w), statistics.median(c)) for w, c in times.values())  # type: ignore[return-value]


def _model(sizes: tuple[int, ...]):
    import jax

    infer, train_step = _jax_mlp.functions()
    x, y = _jax_mlp.batch(sizes, BATCH, seed=0)
    return jax.jit(infer), jax.jit(train_step), _jax_mlp.params(sizes, seed=1), x, y


def measure(sizes: tuple[int, ...], runs: int) -> list[tuple[str, tuple[float, float], tuple[float, float], float]]:
    """(workload, neuron (wall, cpu), XLA:CPU (wall, cpu), max |difference|) per workload."""
    import jax

    neuron, cpu = jax.devices("neuron")[0], jax.devices("cpu")[0]
    infer, train_step, params, x, y = _model(sizes)
    state = {dev: jax.device_put(params, dev) for dev in (neuron, cpu)}

    def infer_on(dev):
        return lambda: np.asarray(infer(state[dev], jax.device_put(x, dev)))

    def train_on(dev):
        def step():
            state[dev], loss = train_step(state[dev], *jax.device_put((x, y), dev))
            return float(loss)
        return step

    diff = float(np.max(np.abs(infer_on(neuron)() - infer_on(cpu)())))
    out = [("MLP inference", *_alternating(infer_on(neuron), infer_on(cpu), runs), diff)]
    loss_diff = abs(train_on(neuron)() - train_on(cpu)())
    out.append(("MLP training step", *_alternating(train_on(neuron), train_on(cpu), runs), loss_diff))

    tiny = jax.jit(lambda t: t + 1)
    small = {dev: jax.device_put(np.arange(4, dtype=np.float32), dev) for dev in (neuron, cpu)}
    calls = 200

    def tiny_on(dev):
        def many():
            for _ in range(calls):
                tiny(small[dev]).block_until_ready()
        return many

    (nw, nc), (cw, cc) = _alternating(tiny_on(neuron), tiny_on(cpu), max(5, runs // 2))
    out.append(("tiny graph (x + 1, 4 floats): per execute", (nw / calls, nc / calls), (cw / calls, cc / calls), 0.0))

    raw = np.empty(16 + 64, np.uint8)
    start = (-raw.ctypes.data) % 64
    host = raw[start:start + 16].view(np.float32)  # 64-byte aligned: lent, not copied, on both
    host[:] = np.arange(4, dtype=np.float32)

    def tiny_host_on(dev):
        def many():
            for _ in range(calls):
                np.asarray(tiny(jax.device_put(host, dev)))
        return many

    (nw, nc), (cw, cc) = _alternating(tiny_host_on(neuron), tiny_host_on(cpu), max(5, runs // 2))
    out.append(("tiny graph from NumPy to NumPy: per call", (nw / calls, nc / calls), (cw / calls, cc / calls), 0.0))
    return out


def parse_args(doc: str, argv: list[str] | None, runs: int, quick: str) -> argparse.Namespace:
    """--runs, --quick and --json, as the JAX benchmarks take them."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=runs, help="timed runs per measurement (medians reported)")
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--json", metavar="PATH", help="also write the rows in the shared result format")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__, argv, 15, "a 10x smaller MLP and 5 runs, to check the script")
    sizes, runs = (SIZES, args.runs) if not args.quick else ((78, 409, 204, 10), 5)
    results = measure(sizes, runs)
    print(f"MLP {'-'.join(map(str, sizes))}, batch {BATCH}, float32; medians of {runs} alternating runs; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    head = f"{'workload':<44} {'neuron wall':>11} {'neuron cpu':>10} {'CPU wall':>9} {'CPU cpu':>8} {'cpu ratio':>9} {'wall ratio':>10} {'max |diff|':>10}"
    print(head)
    print("-" * len(head))
    rows = []
    for name, (nw, nc), (cw, cc), diff in results:
        unit, scale = ("us", 1e6) if "tiny" in name else ("ms", 1e3)
        print(f"{name:<44} {nw * scale:>9.2f}{unit} {nc * scale:>8.2f}{unit} {cw * scale:>7.2f}{unit} "
              f"{cc * scale:>6.2f}{unit} {nc / cc:>9.2f} {nw / cw:>10.2f} {diff:>10.2e}")
        if "tiny" in name:
            rows.append(Row(SUITE, f"{name}, CPU time", nc, "jax.jit on XLA:CPU", cc))
            rows.append(Row(SUITE, f"{name}, wall time", nw, "jax.jit on XLA:CPU", cw))
        else:
            text, met = ratio_target(nc, cc, TARGET_RATIO)
            rows.append(Row(SUITE, f"{name}, CPU time", nc, "jax.jit on XLA:CPU", cc, text, met))
            rows.append(Row(SUITE, f"{name}, wall time", nw, "jax.jit on XLA:CPU", cw))
    write_json(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
