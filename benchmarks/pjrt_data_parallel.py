"""Data parallelism through the neuron PJRT device across processes (issue 18), report only.

1. ``--step``: a data-parallel training step (MLP 784-512-256-10 on a fixed global batch of 256,
   SGD, xm.optimizer_step, xm.mark_step) under ``torchrun --nproc_per_node=P`` for P = 1, 2, 4:
   rank 0's median step wall time, the global batch's samples/s, and the CPU time of a step
   summed over the ranks (each process's own CPU, gloo's threads included). Strong scaling: the
   same global batch split P ways. OMP_NUM_THREADS=1 in every process (torchrun's own default
   for several processes per node).
2. ``--all-reduce``: between two processes, ``xm.all_reduce`` through the plugin (a graph of one
   all-reduce per call: xm.mark_step + wait_device_ops) against ``torch.distributed.all_reduce``
   with gloo on the same values (CPU tensors), alternating in the same processes, 1-64 MB f32.

The host has 2 CPUs shared with other work: the load average is printed beside every table.
Run: ``python benchmarks/pjrt_data_parallel.py [--step] [--all-reduce] [--procs 1 2 4]``.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GLOBAL_BATCH = 256


def _step_worker(out: str, steps: int, warmup: int) -> None:
    import torch
    import torch.distributed as dist
    import torch_xla.core.xla_model as xm
    import torch_xla.distributed.xla_backend  # noqa: F401
    import torch_xla.runtime as xr

    if "TORCHELASTIC_RUN_ID" in os.environ and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        dist.init_process_group("xla", init_method="xla://")
    device = xm.xla_device()
    rank, world = xr.global_ordinal(), xr.world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256),
                                torch.nn.ReLU(), torch.nn.Linear(256, 10), torch.nn.LogSoftmax(dim=1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    shard = GLOBAL_BATCH // world
    gen = torch.Generator().manual_seed(rank)
    x = torch.randn(shard, 784, generator=gen).to(device)
    y = torch.randint(0, 10, (shard,), generator=gen).to(device)
    walls, cpus = [], []
    for k in range(warmup + steps):
        w0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad()
        torch.nn.functional.nll_loss(model(x), y).backward()
        xm.optimizer_step(opt)
        xm.mark_step()
        xm.wait_device_ops()
        if k >= warmup:
            walls.append(time.perf_counter() - w0)
            cpus.append(time.process_time() - c0)
    Path(out, f"rank{rank}.json").write_text(json.dumps({"wall": statistics.median(walls),
                                                         "cpu": statistics.median(cpus), "world": world}))


def _all_reduce_worker(out: str, sizes_mb: list[int], runs: int) -> None:
    import numpy as np
    import torch
    import torch.distributed as dist
    import torch_xla.core.xla_model as xm

    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    device = xm.xla_device()
    xm.set_replication(device, [device])  # as xmp.spawn / the xla:// rendezvous do: a world of processes
    rows = []
    for mb in sizes_mb:
        values = np.random.default_rng(rank).standard_normal(mb * (1 << 20) // 4).astype(np.float32)
        on_device = torch.from_numpy(values).to(device)
        xm.mark_step()
        host = torch.from_numpy(values.copy())
        ours, theirs, ours_cpu, theirs_cpu = [], [], [], []
        for k in range(runs + 1):  # the first of each is the warm-up (our compile)
            dist.barrier()
            w0, c0 = time.perf_counter(), time.process_time()
            r = xm.all_reduce(xm.REDUCE_SUM, on_device)
            xm.mark_step()
            xm.wait_device_ops()
            w1, c1 = time.perf_counter(), time.process_time()
            dist.barrier()
            w2, c2 = time.perf_counter(), time.process_time()
            dist.all_reduce(host)
            w3, c3 = time.perf_counter(), time.process_time()
            host.copy_(torch.from_numpy(values))
            if k:
                ours.append(w1 - w0), ours_cpu.append(c1 - c0), theirs.append(w3 - w2), theirs_cpu.append(c3 - c2)
        if rank == 0:
            np.testing.assert_allclose(r.cpu().numpy(), values + np.random.default_rng(1).standard_normal(
                values.size).astype(np.float32), rtol=1e-6, atol=1e-6)
        rows.append([mb, *(statistics.median(v) for v in (ours, theirs, ours_cpu, theirs_cpu))])
    if rank == 0:
        Path(out, "all_reduce.json").write_text(json.dumps(rows))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun(procs: int, worker_args: list[str]) -> None:
    # torchrun sets OMP_NUM_THREADS=1 for several processes per node, not for one: set it for every
    # count, so that one process is not measured with threaded BLAS (spinning under load) against
    # several without
    env = dict(os.environ, PJRT_DEVICE="NEURON", JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env.setdefault("OMP_NUM_THREADS", "1")
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={procs}", f"--master_port={_free_port()}",
           __file__, *worker_args]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode:
        raise SystemExit(f"torchrun failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}")


def _load() -> str:
    return "load average " + " ".join(f"{v:.1f}" for v in os.getloadavg())


def step(procs: list[int], steps: int) -> None:
    print(f"## Data-parallel step, global batch {GLOBAL_BATCH} ({_load()} before)\n")
    print("| processes | step wall (rank 0) | samples/s | step CPU, all ranks | speed-up (wall) |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    base = None
    for p in procs:
        with tempfile.TemporaryDirectory() as out:
            _torchrun(p, ["--worker", "step", out, str(steps)])
            ranks = [json.loads(Path(out, f"rank{r}.json").read_text()) for r in range(p)]
        wall, cpu = ranks[0]["wall"], sum(r["cpu"] for r in ranks)
        base = base or wall
        print(f"| {p} | {wall * 1e3:.1f} ms | {GLOBAL_BATCH / wall:.0f} | {cpu * 1e3:.1f} ms | {base / wall:.2f}x |",
              flush=True)
    print(f"\n({_load()} after)\n")


def all_reduce(sizes_mb: list[int], runs: int) -> None:
    with tempfile.TemporaryDirectory() as out:
        _torchrun(2, ["--worker", "all-reduce", out, str(runs), *map(str, sizes_mb)])
        rows = json.loads(Path(out, "all_reduce.json").read_text())
    print(f"## All-reduce between 2 processes: xm.all_reduce through the plugin vs torch.distributed (gloo)"
          f"\n\n({_load()}; median of {runs}; rank 0)\n")
    print("| size | plugin wall | gloo wall | ratio | plugin CPU | gloo CPU | ratio |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for mb, ow, tw, oc, tc in rows:
        print(f"| {mb} MB | {ow * 1e3:.1f} ms | {tw * 1e3:.1f} ms | {ow / tw:.2f}x | {oc * 1e3:.1f} ms | "
              f"{tc * 1e3:.1f} ms | {oc / tc:.2f}x |", flush=True)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        kind, out = sys.argv[2], sys.argv[3]
        if kind == "step":
            _step_worker(out, int(sys.argv[4]), warmup=3)
        else:
            _all_reduce_worker(out, [int(v) for v in sys.argv[5:]], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step", action="store_true")
    parser.add_argument("--all-reduce", action="store_true")
    parser.add_argument("--procs", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--sizes-mb", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if not (args.step or args.all_reduce):
        args.step = args.all_reduce = True
    if args.step:
        step(args.procs, args.steps)
    if args.all_reduce:
        all_reduce(args.sizes_mb, args.runs)


if __name__ == "__main__":
    main()
