"""A data-parallel MLP training step on 1, 2 and 4 emulated NeuronCores against XLA:CPU with as many
host devices (--xla_force_host_platform_device_count), in one process (report only, issue 18).

The same global batch is split over the devices (strong scaling) in two formulations:
- `shard_map`: each device runs forward and backward on its slice of the batch and the gradients
  are summed with a psum inside the manual region: the work splits N ways;
- `jit + NamedSharding`: the batch sharded on "data", parameters replicated, the partitioner's
  business. XLA:CPU splits the work; the neuron device's SPMD pass computes global values on every
  core (docs/pjrt.md), so it does the whole step on each core plus the gathers.

Each step is end to end as a training loop sees it (parameters stay on the devices, the loss comes
back as a float). Neuron and XLA:CPU runs alternate; medians of wall time and of this process's
CPU time (all threads). This host has few cores: N emulated cores share them, so the scaling shows
the overheads more than a speed-up.

Run: ``python benchmarks/spmd_data_parallel.py [--runs N] [--quick] [--json PATH]``.
"""
from __future__ import annotations

import os
import sys

COUNTS = (1, 2, 4)
os.environ["JAX_PLATFORMS"] = "neuron,cpu"
os.environ["NEURON_RT_NUM_CORES"] = str(max(COUNTS))
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           f" --xla_force_host_platform_device_count={max(COUNTS)}").strip()
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

from benchmarks import _jax_mlp  # noqa: E402
from benchmarks._results import Row, write_json  # noqa: E402
from benchmarks.pjrt_jax_vs_cpu import _alternating, parse_args  # noqa: E402

SIZES = (784, 1024, 512, 10)
BATCH = 256
SUITE = "data-parallel training step on N emulated NeuronCores vs XLA:CPU on N host devices (issue 18)"


def _steps(devs: list, form: str):
    """The jitted step of one formulation on a mesh of `devs` and how to place its inputs."""
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    _, train_step = _jax_mlp.functions()
    mesh = Mesh(np.array(devs), ("data",))
    rep, data = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    if form == "jit + NamedSharding":
        step = jax.jit(train_step, in_shardings=(rep, data, data), out_shardings=(rep, rep))
    else:
        loss_grad = jax.value_and_grad(_jax_mlp.loss_function())

        def local(ps, x, y):  # the mean over the global batch: the mean of the devices' means
            loss, grads = loss_grad(ps, x, y)
            n = jax.lax.psum(1, "data")
            grads = jax.tree_util.tree_map(lambda g: jax.lax.psum(g, "data") / n, grads)
            return _jax_mlp.sgd(ps, grads), jax.lax.psum(loss, "data") / n

        step = jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(P(), P("data"), P("data")), out_specs=(P(), P()),
                                     check_vma=False))
    return step, rep, data


def measure(sizes: tuple[int, ...], batch: int, runs: int) -> list[tuple[str, int, tuple, tuple, float]]:
    """(formulation, cores, neuron (wall, cpu), XLA:CPU (wall, cpu), |loss difference|) rows."""
    import jax

    params = _jax_mlp.params(sizes, seed=1)
    x, y = _jax_mlp.batch(sizes, batch, seed=0)
    out = []
    for form in ("shard_map", "jit + NamedSharding"):
        for n in COUNTS:
            runners = []
            for platform in ("neuron", "cpu"):
                step, rep, data = _steps(jax.devices(platform)[:n], form)
                state = {"p": jax.device_put(params, rep)}

                def one(step=step, state=state, rep=rep, data=data):
                    state["p"], loss = step(state["p"], jax.device_put(x, data), jax.device_put(y, data))
                    return float(loss)
                runners.append(one)
            diff = abs(runners[0]() - runners[1]())
            mine, peer = _alternating(runners[0], runners[1], runs)
            out.append((form, n, mine, peer, diff))
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__, argv, 11, "a 10x smaller MLP and 3 runs, to check the script")
    sizes, batch, runs = (SIZES, BATCH, args.runs) if not args.quick else ((78, 102, 51, 10), 32, 3)
    results = measure(sizes, batch, runs)
    print(f"MLP {'-'.join(map(str, sizes))}, global batch {batch}, float32; medians of {runs} alternating runs; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    head = (f"{'formulation':<20} {'cores':>5} {'neuron wall':>11} {'neuron cpu':>10} {'CPU wall':>9} {'CPU cpu':>8} "
            f"{'wall ratio':>10} {'cpu ratio':>9} {'neuron wall vs 1 core':>21} {'|loss diff|':>11}")
    print(head)
    print("-" * len(head))
    rows, first = [], {}
    for form, n, (nw, nc), (cw, cc), diff in results:
        first.setdefault(form, nw)
        print(f"{form:<20} {n:>5} {nw * 1e3:>9.2f}ms {nc * 1e3:>8.2f}ms {cw * 1e3:>7.2f}ms {cc * 1e3:>6.2f}ms "
              f"{nw / cw:>10.2f} {nc / cc:>9.2f} {nw / first[form]:>21.2f} {diff:>11.2e}")
        peer = f"XLA:CPU, {n} host device(s)"
        rows.append(Row(SUITE, f"{form}, {n} core(s), CPU time", nc, peer, cc))
        rows.append(Row(SUITE, f"{form}, {n} core(s), wall time", nw, peer, cw))
    write_json(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
