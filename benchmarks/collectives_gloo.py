"""All-reduce between two processes: the emulator's all-reduce (an HLO program run by each rank
with neuron_customcall.distributed.GlooCommunicator) against torch.distributed.all_reduce with
gloo on the same tensors, in the same processes, alternating, for 1 MB to 256 MB of f32.

Both ride the same transport, so the issue's target is a ratio of at most 1.2x. Ours (from
64 KiB) reduce-scatters then all-gathers over point-to-point messages, each rank folding its
chunk in group order into the result; gloo's all_reduce runs its own ring.

Run: ``python benchmarks/collectives_gloo.py [--sizes-mb 1 4 16 64 256] [--runs N] [--json PATH]``
(it starts its second rank itself, on localhost).
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

TARGET_RATIO = 1.2
SUITE = "All-reduce between two processes: emulator over gloo vs torch.distributed (issue 18)"

PROGRAM = """HloModule ar_bench, replica_count=2
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}}
ENTRY e {{
  x = f32[{n}] parameter(0)
  ROOT s = f32[{n}] all-reduce(x), replica_groups={{{{0,1}}}}, to_apply=add
}}"""


def _rank_main(sizes_mb: list[int], runs: int) -> list[tuple[int, float, float, float, float]]:
    """In each rank: (MB, ours wall, peer wall, ours CPU, peer CPU) medians per size."""
    import torch
    import torch.distributed as dist

    import hlo
    from emulator import load_artifact
    from neuron_customcall.compiler import compile_module
    from neuron_customcall.distributed import GlooCommunicator, run_on_process_group

    dist.init_process_group("gloo", init_method="env://")
    comm = GlooCommunicator()
    rank = dist.get_rank()
    rows = []
    for mb in sizes_mb:
        n = mb * (1 << 20) // 4
        exe = load_artifact(compile_module(hlo.load(PROGRAM.format(n=n))))
        x = np.random.default_rng(rank).standard_normal(n).astype(np.float32)
        t = torch.from_numpy(x.copy())
        want = None
        ours, peer, ours_cpu, peer_cpu = [], [], [], []
        for k in range(runs + 1):
            dist.barrier()
            w, c = time.perf_counter(), time.process_time()
            got = run_on_process_group(exe, [x], communicator=comm)[0]
            ours.append(time.perf_counter() - w)
            ours_cpu.append(time.process_time() - c)
            t.copy_(torch.from_numpy(x))
            dist.barrier()
            w, c = time.perf_counter(), time.process_time()
            dist.all_reduce(t)
            peer.append(time.perf_counter() - w)
            peer_cpu.append(time.process_time() - c)
            if k == 0:
                want = t.numpy()
                if not np.allclose(got, want, rtol=1e-5, atol=1e-5):
                    raise SystemExit(f"{mb} MB: the emulator's all-reduce differs from torch.distributed's")
        med = statistics.median
        rows.append((mb, med(ours[1:]), med(peer[1:]), med(ours_cpu[1:]), med(peer_cpu[1:])))
    dist.destroy_process_group()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes-mb", type=int, nargs="+", default=[1, 4, 16, 64, 256])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--rank", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rank is not None:  # the second rank: no output of its own
        _rank_main(args.sizes_mb, args.runs)
        return 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2", JAX_PLATFORMS="cpu")
    other = subprocess.Popen([sys.executable, __file__, "--rank", "1", "--runs", str(args.runs), "--sizes-mb",
                              *map(str, args.sizes_mb)], env=dict(env, RANK="1"))
    os.environ.update(env, RANK="0")
    load = os.getloadavg()[0]
    rows = _rank_main(args.sizes_mb, args.runs)
    if other.wait(timeout=600) != 0:
        raise SystemExit("rank 1 failed")
    print(f"f32 all-reduce between 2 processes on localhost; median of {args.runs} runs after one warm-up, "
          f"alternating; load average {load:.1f} on {os.cpu_count()} CPUs (rank 0's times)")
    print(f"{'size':>7} {'ours wall':>10} {'gloo wall':>10} {'ratio':>6} {'ours CPU':>9} {'gloo CPU':>9} {'ratio':>6}")
    from _results import Row, ratio_target, write_json

    out = []
    for mb, ow, pw, oc, pc in rows:
        print(f"{mb:>4} MB {ow * 1e3:>8.1f}ms {pw * 1e3:>8.1f}ms {ow / pw:>5.2f}x {oc * 1e3:>7.1f}ms {pc * 1e3:>7.1f}ms "
              f"{oc / pc if pc else float('nan'):>5.2f}x")
        text, met = ratio_target(ow, pw, TARGET_RATIO)
        out.append(Row(SUITE, f"all-reduce {mb} MB f32, 2 processes", ow, "torch.distributed.all_reduce (gloo)",
                       pw, text, met))
    write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
