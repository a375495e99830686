"""HLO while loops on the emulator against XLA:CPU, per iteration: a `fori_loop` whose body is one
scalar add (the cost of the loop itself: condition, counter, state), a `fori_loop` over 8 floats
with tanh, a 2,000-step `scan` (a dynamic-slice of its input and a dynamic-update-slice of its
output per step) and a loop writing one row per iteration into a loop-carried buffer in place.

Ours is the compiled artifact run by `emulator.Executable.run` on NumPy arrays; XLA:CPU is
`jax.jit` with its inputs already on the device. Both answers are compared before timing. Wall and
CPU time (process time) of every run are recorded: on a shared machine CPU time is the better
guide. Each tree given with `--tree NAME=PATH` (a checkout of this repository: e.g. the commit
before a change) runs in its own worker process; the driver asks the workers for one run at a
time, in turn, so the trees see the same load, interleaved.

Target (issue 15): the loop itself <= 1 us per iteration.
Run: ``python benchmarks/loops_vs_xla_cpu.py [--runs N] [--tree before=/path --tree after=.]``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))


def workloads() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...], int]]:
    """name -> (JAX function, example arguments, iterations)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    def trivial(x: Any) -> Any:
        return jax.lax.fori_loop(0, 100_000, lambda i, v: v + 1.0, x)

    def tanh8(x: Any) -> Any:
        return jax.lax.fori_loop(0, 1000, lambda i, v: jnp.tanh(v * 0.9 + 0.1 * i), x)

    def scan(xs: Any) -> Any:
        def step(c: Any, x: Any) -> tuple[Any, Any]:
            c = c * 0.5 + x
            return c, c * 2.0
        return jax.lax.scan(step, jnp.zeros(8, jnp.float32), xs)

    def rows(buf: Any) -> Any:
        def body(i: Any, b: Any) -> Any:
            return jax.lax.dynamic_update_slice(b, jnp.full((1, 64), i, jnp.float32), (i, 0))
        return jax.lax.fori_loop(0, buf.shape[0], body, buf)

    return {
        "fori_loop, scalar add (the loop itself), 100000 iterations": (trivial, (np.float32(0),), 100_000),
        "fori_loop, tanh on 8 floats, 1000 iterations": (tanh8, (np.ones(8, np.float32),), 1000),
        "scan, 2000 steps over f32[2000,8]": (scan, (np.ones((2000, 8), np.float32),), 2000),
        "in-place dynamic-update-slice, 4096 rows of f32[4096,64]": (rows, (np.zeros((4096, 64), np.float32),), 4096),
    }


# ---------------------------------------------------------------------------------------- worker

def _timed(fn: Callable[[], Any]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def worker() -> None:
    """Answers one JSON line per request line: {"name", "warmup"} -> wall/CPU of one run per side."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import numpy as np

    import emulator
    import hlo
    from neuron_customcall.compiler import compile_module

    chosen = workloads()
    ready: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {}
    for line in sys.stdin:
        req = json.loads(line)
        name = req["name"]
        if name not in ready:
            f, args, _ = chosen[name]
            proto = jax.jit(f).lower(*args).compiler_ir("hlo").as_serialized_hlo_module_proto()
            exe = emulator.load_artifact(compile_module(hlo.load(proto)))
            flat = [np.asarray(a) for a in args]
            dev, xla = jax.device_put(args), jax.jit(f)
            want = [np.asarray(a) for a in jax.tree_util.tree_leaves(xla(*dev))]
            got = exe.run(flat)
            for a, b in zip(want, got):
                np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5, err_msg=name)
            ready[name] = (lambda exe=exe, flat=flat: exe.run(flat),
                           lambda xla=xla, dev=dev: jax.block_until_ready(xla(*dev)))
            for _ in range(req.get("warmup", 2)):
                ready[name][0]()
                ready[name][1]()
        ours, ref = ready[name]
        ow, oc = _timed(ours)
        xw, xc = _timed(ref)
        print(json.dumps({"ours_wall": ow, "ours_cpu": oc, "xla_wall": xw, "xla_cpu": xc}), flush=True)


# ---------------------------------------------------------------------------------------- driver

def _us(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.1f} us"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="timed runs per workload, tree and side (median)")
    parser.add_argument("--tree", action="append", metavar="NAME=PATH",
                        help="a checkout to measure (repeatable; default: this one)")
    parser.add_argument("--only", nargs="+", metavar="WORDS", help="workloads whose name contains one of these")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker()
        return 0
    trees = [t.split("=", 1) for t in (args.tree or [f"this={os.path.dirname(HERE)}"])]
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    sys.path.insert(0, os.path.dirname(HERE))
    names = [n for n in workloads() if not args.only or any(o in n for o in args.only)]
    procs = {}
    for name, path in trees:
        env = dict(os.environ, PYTHONPATH=os.path.abspath(path), JAX_PLATFORMS="cpu")
        procs[name] = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"], env=env, text=True,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=os.path.abspath(path))
    samples: dict[tuple[str, str], list[dict[str, float]]] = {}
    load = [os.getloadavg()[0]]
    try:
        for w in names:
            for r in range(args.runs):
                for tree, p in procs.items():  # in turn: the same load on every tree
                    assert p.stdin is not None and p.stdout is not None
                    p.stdin.write(json.dumps({"name": w}) + "\n")
                    p.stdin.flush()
                    line = p.stdout.readline()
                    if not line:
                        raise SystemExit(f"worker for tree {tree} died on {w!r}")
                    samples.setdefault((w, tree), []).append(json.loads(line))
            load.append(os.getloadavg()[0])
    finally:
        for p in procs.values():
            if p.stdin is not None:
                p.stdin.close()
            p.wait(timeout=60)
    iterations = {n: v[2] for n, v in workloads().items()}
    print(f"median of {args.runs} runs per side, trees interleaved run by run; load average "
          f"{min(load):.1f}-{max(load):.1f} on {os.cpu_count()} CPUs")
    head = (f"{'workload':58} {'tree':8} {'ours wall':>10} {'ours CPU':>10} {'XLA wall':>10} {'XLA CPU':>10} "
            f"{'wall x':>7} {'CPU x':>7} {'us/iter (CPU)':>13}")
    print(head)
    print("-" * len(head))
    for w in names:
        for tree in procs:
            m = {k: statistics.median(s[k] for s in samples[(w, tree)]) for k in samples[(w, tree)][0]}
            print(f"{w:58} {tree:8} {_us(m['ours_wall']):>10} {_us(m['ours_cpu']):>10} {_us(m['xla_wall']):>10} "
                  f"{_us(m['xla_cpu']):>10} {m['ours_wall'] / m['xla_wall']:>6.1f}x {m['ours_cpu'] / m['xla_cpu']:>6.1f}x "
                  f"{m['ours_cpu'] / iterations[w] * 1e6:>13.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
