"""The examples' workloads on our side and on the framework's own CPU path, timed side by side.

1. examples/hlo_tour.py: the JAX two-layer MLP SGD step, ``neuron_customcall.jax.jit`` (compiled
   by our backend, run on the emulator) against ``jax.jit`` on XLA:CPU.
2. examples/nki_framework_custom_op.py: ``a * b * nki_add(a, b)`` (256x1024) with the NKI
   addition kernel as a custom-call, forward and gradient, against XLA:CPU running ``a * b * (a + b)``.
3. examples/custom_op_wheel: neuron_relu's ReLU (C++ on the emulated GpSimd engine, the wheel's
   sources loaded with custom_op.load), forward and backward through autograd on 1024x1024,
   against torch.relu on CPU.

The issues set no target for these: they show what a user of each example pays against the plain
framework. Best of N runs after warm-up (compilation), ours and the peer's alternating so that
load from other processes falls on both. Every result is checked before it is timed.
Run: ``python benchmarks/examples_peers.py [--quick] [--json PATH]``.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Callable

os.environ.setdefault("JAX_PLATFORMS", "cpu")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchmarks._results import Row, write_json  # noqa: E402

EXAMPLES = ROOT / "examples"
SUITE = "Examples: our path vs the framework's own CPU path (no targets set)"


def load_example(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def best_pair(ours: Callable[[], object], peer: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Best seconds of each over `repeat` alternating runs, after one warm-up run of each."""
    ours()
    peer()
    best_ours = best_peer = float("inf")
    for _ in range(repeat):
        for fn, is_ours in ((ours, True), (peer, False)):
            start = time.perf_counter()
            fn()
            took = time.perf_counter() - start
            if is_ours:
                best_ours = min(best_ours, took)
            else:
                best_peer = min(best_peer, took)
    return best_ours, best_peer


def hlo_tour_step(repeat: int) -> list[Row]:
    import jax

    import neuron_customcall.jax as ncc_jax

    tour = load_example(EXAMPLES / "hlo_tour.py", "hlo_tour")
    step, params, x, y = tour._jax_problem()
    ours, peer = ncc_jax.jit(step), jax.jit(step)
    np.testing.assert_allclose(np.asarray(ours(params, x, y)[0]), np.asarray(peer(params, x, y)[0]), rtol=1e-5)
    t_ours, t_peer = best_pair(lambda: jax.block_until_ready(ours(params, x, y)),
                               lambda: jax.block_until_ready(peer(params, x, y)), repeat)
    return [Row(SUITE, "hlo_tour: JAX MLP 64-32-10 SGD step, batch 16", t_ours, "jax.jit on XLA:CPU", t_peer)]


def nki_custom_op(repeat: int) -> list[Row]:
    import jax
    import jax.numpy as jnp

    import neuron_customcall.jax as nj

    example = load_example(EXAMPLES / "nki_framework_custom_op.py", "nki_framework_custom_op")
    nki_add = example.nki_kernels()

    @jax.custom_vjp
    def nki_add_func(a, b):
        return nki_add(a, b)

    nki_add_func.defvjp(lambda a, b: (nki_add_func(a, b), (a, b)), lambda res, grad: (grad, grad))
    rng = np.random.default_rng(0)
    a, b = (jnp.asarray(rng.standard_normal((256, 1024), dtype=np.float32)) for _ in range(2))
    cases = [
        ("forward", nj.jit(lambda a, b: a * b * nki_add(a, b)), jax.jit(lambda a, b: a * b * (a + b))),
        ("gradient", nj.jit(jax.grad(lambda x, y: (nki_add_func(x, y) * x * y).sum(), argnums=(0, 1))),
         jax.jit(jax.grad(lambda x, y: ((x + y) * x * y).sum(), argnums=(0, 1)))),
    ]
    rows = []
    for label, ours, peer in cases:
        for got, want in zip(jax.tree_util.tree_leaves(ours(a, b)), jax.tree_util.tree_leaves(peer(a, b))):
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
        t_ours, t_peer = best_pair(lambda: jax.block_until_ready(ours(a, b)),
                                   lambda: jax.block_until_ready(peer(a, b)), repeat)
        rows.append(Row(SUITE, f"nki_framework_custom_op: a*b*nki_add(a, b) 256x1024, {label}", t_ours,
                        "jax.jit on XLA:CPU", t_peer))
    return rows


def wheel_relu(repeat: int) -> list[Row]:
    import torch

    from neuron_customcall import custom_op

    project = EXAMPLES / "custom_op_wheel"
    with tempfile.TemporaryDirectory(prefix="neuron-relu-bench-") as build:
        custom_op.load("neuron_relu", [project / "csrc" / "relu.cpp"], [project / "csrc" / "relu_shape.cpp"],
                       build_directory=build)
    relu = load_example(project / "neuron_relu" / "autograd.py", "neuron_relu_autograd").relu
    x = torch.randn(1024, 1024)
    grad = torch.randn(1024, 1024)

    def step(fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        leaf = x.detach().requires_grad_()
        fn(leaf).backward(grad)
        return leaf.grad

    assert torch.equal(step(relu), step(torch.relu))
    t_ours, t_peer = best_pair(lambda: step(relu), lambda: step(torch.relu), repeat)
    return [Row(SUITE, "custom_op_wheel: neuron_relu forward + backward, 1024x1024", t_ours,
                "torch.relu on CPU", t_peer)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 runs instead of 20")
    parser.add_argument("--json", metavar="PATH", help="also write the rows in the shared result format")
    args = parser.parse_args(argv)
    repeat = 3 if args.quick else 20
    rows = hlo_tour_step(repeat) + nki_custom_op(repeat) + wheel_relu(repeat)
    print(f"{'workload':64s} {'ours':>10s} {'peer':>10s} {'ratio':>8s}")
    for r in rows:
        print(f"{r.workload:64s} {r.ours_s * 1e3:8.2f}ms {r.peer_s * 1e3:8.2f}ms {r.ratio:7.2f}x  ({r.peer})")
    write_json(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
