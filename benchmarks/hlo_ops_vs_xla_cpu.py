"""The emulator's slower HLO ops against XLA:CPU: a small CNN training step (3x3 convolutions and
their gradients, max and average pooling and the max-pool gradient, a dense layer), argmax over
rows, a fori_loop over small tensors, a fori_loop with loop-invariant work, a gather/scatter-add (embedding lookup and its gradient),
sort and top_k.

Each workload is one JAX function, run through our backend (``neuron_customcall.jax.jit``: JAX
arrays in, JAX arrays out) and through plain ``jax.jit`` on XLA:CPU with its inputs already on the
device (XLA:CPU's execution plus JAX's dispatch, a few microseconds: the strict reference), in
the same process, alternating run by run; median of several runs after warm-up. Both results are
compared before timing (a wrong answer fails the script).

Target: ours <= 1.5x XLA:CPU per workload.
Run: ``python benchmarks/hlo_ops_vs_xla_cpu.py [--runs N] [--quick] [--only NAME ...] [--json PATH]``.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

from benchmarks._results import Row as ResultRow, ratio_target, write_json  # noqa: E402
from benchmarks.mlp_vs_xla_cpu import _paired_median_ms  # noqa: E402  (alternating runs, medians)

TARGET_RATIO = 1.5
SUITE = "HLO ops: emulator (neuron_customcall.jax.jit) vs XLA:CPU (jax.jit)"


@dataclass(frozen=True)
class Workload:
    name: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    tol: float  # max |ours - XLA:CPU| allowed, relative to the largest |XLA:CPU| value (0: exact)


def workloads(quick: bool) -> list[Workload]:
    """The functions and inputs; --quick shrinks every size (checks the chain, not the speed)."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    batch, side = (8, 12) if quick else (32, 28)

    def cnn_params() -> dict[str, np.ndarray]:
        def w(*shape: int) -> np.ndarray:
            return (rng.standard_normal(shape) / np.sqrt(np.prod(shape[:-1]))).astype(np.float32)
        flat = 16 * (side // 4) ** 2
        return {"c1": w(3, 3, 1, 8), "b1": np.zeros(8, np.float32), "c2": w(3, 3, 8, 16),
                "b2": np.zeros(16, np.float32), "d": w(flat, 10), "bd": np.zeros(10, np.float32)}

    def conv(x: Any, k: Any) -> Any:
        return jax.lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def cnn_loss(p: dict[str, Any], x: Any, y: Any) -> Any:
        h = jax.nn.relu(conv(x, p["c1"]) + p["b1"])
        h = jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")  # max pool
        h = jax.nn.relu(conv(h, p["c2"]) + p["b2"])
        h = jax.lax.reduce_window(h, 0.0, jax.lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4  # avg pool
        logits = h.reshape(h.shape[0], -1) @ p["d"] + p["bd"]
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=-1))

    def cnn_step(p: dict[str, Any], x: Any, y: Any) -> Any:
        value, grads = jax.value_and_grad(cnn_loss)(p, x, y)
        return jax.tree_util.tree_map(lambda a, g: a - 0.01 * g, p, grads), value

    x = rng.standard_normal((batch, side, side, 1)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, batch)]
    image = rng.standard_normal((batch, side, side, 16)).astype(np.float32)
    kernel = (rng.standard_normal((3, 3, 16, 16)) / 12).astype(np.float32)

    rows, cols = (64, 100) if quick else (512, 1000)
    scores = rng.standard_normal((rows, cols)).astype(np.float32)

    def loop(x: Any) -> Any:
        return jax.lax.fori_loop(0, 100 if quick else 1000, lambda i, v: jnp.tanh(v * 0.9 + 0.1 * i), x)

    side_w = 32 if quick else 256
    weights = (rng.standard_normal((side_w, side_w)) / side_w).astype(np.float32)

    def invariant_loop(w: Any, x: Any) -> Any:  # exp(w) does not change: XLA hoists it out of the loop
        return jax.lax.fori_loop(0, 100, lambda i, v: jnp.tanh(jnp.exp(w) @ v), x)

    vocab, dim, n_idx = (100, 16, 256) if quick else (1000, 64, 4096)
    table = rng.standard_normal((vocab, dim)).astype(np.float32)
    idx = rng.integers(0, vocab, n_idx).astype(np.int32)
    grad_rows = rng.standard_normal((n_idx, dim)).astype(np.float32)

    def gather_scatter(t: Any, i: Any, g: Any) -> Any:
        return t[i].sum(axis=1), jnp.zeros_like(t).at[i].add(g)

    srows, scols = (16, 128) if quick else (256, 1000)
    keys = rng.standard_normal((srows, scols)).astype(np.float32)
    return [
        Workload("CNN train step (conv 3x3, pools, dense; fwd+bwd)", cnn_step, (cnn_params(), x, y), 1e-4),
        Workload("conv 3x3 SAME, 16->16 channels", conv, (image, kernel), 1e-5),
        Workload("conv 3x3 weight + input gradients",
                 jax.grad(lambda x, k: jnp.sum(conv(x, k) ** 2), argnums=(0, 1)), (image, kernel), 1e-5),
        Workload("max pool 2x2 fwd+bwd (reduce-window, select-and-scatter)",
                 jax.grad(lambda x: jnp.sum(jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1),
                                                                  (1, 2, 2, 1), "VALID") ** 2)), (image,), 1e-6),
        Workload(f"argmax over rows ({rows}x{cols})", lambda s: jnp.argmax(s, axis=1), (scores,), 0),
        Workload(f"fori_loop, {100 if quick else 1000} iterations on 8 floats", loop,
                 (rng.standard_normal(8).astype(np.float32),), 1e-5),
        Workload(f"fori_loop, 100 iterations of tanh(exp(W) @ v), W {side_w}x{side_w} (loop-invariant exp)",
                 invariant_loop, (weights, rng.standard_normal(side_w).astype(np.float32)), 1e-5),
        Workload(f"gather + scatter-add ({n_idx} rows of {vocab}x{dim})", gather_scatter, (table, idx, grad_rows),
                 1e-5),
        Workload(f"sort rows ({srows}x{scols})", lambda k: jnp.sort(k, axis=1), (keys,), 0),
        Workload(f"top_k 8 of rows ({srows}x{scols})", lambda k: jax.lax.top_k(k, 8), (keys,), 0),
    ]


@dataclass
class Measured:
    name: str
    ours_s: float
    xla_s: float
    max_diff: float


def measure(w: Workload, runs: int) -> Measured:
    import jax

    import neuron_customcall.jax as ncj

    args = jax.device_put(w.args)
    ours_fn, xla_fn = ncj.jit(w.fn, cache=False), jax.jit(w.fn)
    want = jax.tree_util.tree_leaves(xla_fn(*args))
    got = jax.tree_util.tree_leaves(ours_fn(*args))
    diff = 0.0
    for a, b in zip(want, got):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            raise SystemExit(f"{w.name}: result {a.dtype}{a.shape} from XLA:CPU, {b.dtype}{b.shape} from ours")
        if a.size:
            d = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
            scale = max(1.0, float(np.max(np.abs(a))))
            if not d <= w.tol * scale:
                raise SystemExit(f"{w.name}: max |diff| {d:g} above {w.tol:g} x {scale:g}")
            diff = max(diff, d)
    ours_ms, xla_ms, _ = _paired_median_ms(lambda: jax.block_until_ready(ours_fn(*args)),
                                           lambda: jax.block_until_ready(xla_fn(*args)), runs, warmup=3)
    return Measured(w.name, ours_ms / 1e3, xla_ms / 1e3, diff)


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.1f} us"


def report(rows: list[Measured]) -> str:
    width = max(len(r.name) for r in rows)
    head = f"{'workload':<{width}} {'ours':>11} {'XLA:CPU':>11} {'ratio':>7} {'max |diff|':>10}"
    lines = [head, "-" * len(head)]
    for r in rows:
        ratio = r.ours_s / r.xla_s
        lines.append(f"{r.name:<{width}} {_fmt(r.ours_s):>11} {_fmt(r.xla_s):>11} {ratio:>6.2f}x {r.max_diff:>10.2e}"
                     f"{'' if ratio <= TARGET_RATIO else '  (target <= %gx missed)' % TARGET_RATIO}")
    return "\n".join(lines)


def result_rows(rows: list[Measured]) -> list[ResultRow]:
    out = []
    for r in rows:
        text, met = ratio_target(r.ours_s, r.xla_s, TARGET_RATIO)
        out.append(ResultRow(SUITE, r.name, r.ours_s, "XLA:CPU jax.jit", r.xla_s, text, met))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=21, help="timed runs per workload and side (median reported)")
    parser.add_argument("--quick", action="store_true", help="small workloads and 5 runs, to check the script")
    parser.add_argument("--only", nargs="+", metavar="WORDS", help="workloads whose name contains one of these")
    parser.add_argument("--json", metavar="PATH", help="also write the rows in the shared result format")
    args = parser.parse_args(argv)
    runs = 5 if args.quick else args.runs
    chosen = [w for w in workloads(args.quick) if not args.only or any(o in w.name for o in args.only)]
    rows = [measure(w, runs) for w in chosen]
    print(f"float32; median of {runs} runs after warm-up, alternating; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")
    print(report(rows))
    write_json(args.json, result_rows(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
