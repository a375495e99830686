"""All-reduce between two processes: the emulator's all-reduce (an HLO program run by each rank
with neuron_customcall.distributed.GlooCommunicator) against torch.distributed.all_reduce with
gloo on the same tensors, in the same processes, alternating, for 1 MB to 256 MB of f32.

Both ride the same transport, so the issue's target is a ratio of at most 1.2x. Between two
processes ours sends each rank's whole value to the other and folds the two in group order, the
received value arriving in the result (a pair exchange: GlooCommunicator._reduce_in_pair; its
header rides beside it on a second gloo group). `--ab` adds, in the same rounds, "buckets": the
all-reduce of sessions 11-14 (below 6 MB the value padded into a bucket with a gloo group of its
own, gloo's all_reduce, then a trailer that checks the call: neuron_customcall/distributed/trailer.py),
"headers": the all-reduce of session 10 (a header exchange with the peer on a second gloo group,
then gloo's all_reduce), "chunked": the path for the reductions neither covers (reduce-scatter,
fold in group order, all-gather over point-to-point messages, headers on their own group,
recycled results), and "polling": ours polling its gloo calls for up to 6 ms before it blocks
(neuron_customcall/distributed/polling.py, off by default: NEURON_CUSTOMCALL_COLLECTIVE_POLL_US);
`--polling` adds only that one. Every variant starts after a barrier on a group of its own, so
that none follows a small exchange on its own connections, and the variants take turns in going
first. gloo's operand is refilled with NumPy before its barrier, outside its timing (gloo reduces
in place; ours leaves its operand as it is, as XLA's all-reduce must): torch's copy_ wakes its
intra-op threads, whose spinning slowed the next gloo call 3x on this 2-CPU host (1 MB: 9-12 ms
against 1.4-1.8 ms, measured at load 4-5).

Per variant and size: the median, mean and first quartile of the calls' wall times (at 64 KB-4 MB
gloo's own calls are bimodal on this host, 0.5 or 3-4 ms at 1 MB, in a share that changes from
minute to minute: a median alone flips with it, the mean is the calls' total time, the first
quartile the calls that did not stall), and the median CPU time of the process; ratios against
gloo's. The JSON row carries the medians. Small sizes need a few hundred runs to settle.

Run: ``python benchmarks/collectives_gloo.py [--sizes-mb 1 4 16 64 256] [--runs N] [--ab] [--polling]
[--json PATH]`` (it starts its second rank itself, on localhost).
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

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


class _Chunked:
    """The all-reduce without a transport reduction, for the A/B."""

    @staticmethod
    def reduce(group: Any, value: Any, reducer: str, *, op: str = "") -> None:
        return None


def _variants(ab: bool, polling: bool = False) -> dict[str, Any]:
    """name -> the communicator each variant of ours runs with (built by every rank in this order)."""
    import torch.distributed as dist

    from neuron_customcall.distributed import GlooCommunicator
    from neuron_customcall.distributed.rendezvous import GlooGroups

    variants = {"ours": GlooCommunicator()}
    if ab:
        # groups without a store make no buckets: headers first, then gloo's all_reduce (session 10)
        variants["headers"] = GlooCommunicator(group=GlooGroups(dist.new_group(backend="gloo"),
                                                                dist.new_group(backend="gloo")))
        chunked = GlooCommunicator()  # headers on their own group, no gloo all_reduce
        chunked.reduce = _Chunked.reduce
        variants["chunked"] = chunked
    if ab:
        buckets = GlooCommunicator()  # gloo's all_reduce in bucket groups with trailers (sessions 11-14)
        buckets._pair_max = 0
        variants["buckets"] = buckets
    if ab or polling:
        from neuron_customcall.distributed.polling import POLL_MAX_S

        polls = GlooCommunicator()  # polls gloo's call before it blocks (polling.py; off by default)
        polls._poll_window = POLL_MAX_S
        variants["polling"] = polls
    return variants


def _summary(walls: list[float], cpus: list[float]) -> dict[str, float]:
    """A variant's calls: the median, mean and first quartile of their wall times, and their median CPU."""
    return {"p50": statistics.median(walls), "mean": statistics.fmean(walls),
            "p25": float(np.percentile(walls, 25)), "cpu": statistics.median(cpus)}


def _rank_main(sizes_mb: list[int], runs: int, ab: bool, polling: bool = False
               ) -> list[tuple[int, dict[str, dict[str, float]]]]:
    """In each rank, per size: variant -> (median wall, median CPU); the variants are ours (and
    `headers` and `chunked` with --ab) and "gloo"."""
    import torch
    import torch.distributed as dist

    import hlo
    from emulator import load_artifact
    from neuron_customcall.compiler import compile_module
    from neuron_customcall.distributed import run_on_process_group

    torch.set_num_threads(1)  # no intra-op threads spinning beside gloo's (both sides copy with NumPy anyway)
    dist.init_process_group("gloo", init_method="env://")
    variants = _variants(ab, polling)
    barrier = dist.new_group(backend="gloo")
    rank = dist.get_rank()
    rows = []
    for mb in sizes_mb:
        n = mb * (1 << 20) // 4
        exe = load_artifact(compile_module(hlo.load(PROGRAM.format(n=n))))
        x = np.random.default_rng(rank).standard_normal(n).astype(np.float32)
        t = torch.from_numpy(x.copy())
        times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in [*variants, "gloo"]}
        names = list(times)
        for k in range(runs + 1):
            for name in names[k % len(names):] + names[:k % len(names)]:  # each variant in each place in turn
                walls, cpus = times[name]
                if name == "gloo":
                    np.copyto(t.numpy(), x)
                dist.barrier(group=barrier)
                w, c = time.perf_counter(), time.process_time()
                if name == "gloo":
                    dist.all_reduce(t)
                else:
                    got = run_on_process_group(exe, [x], communicator=variants[name])[0]
                walls.append(time.perf_counter() - w)
                cpus.append(time.process_time() - c)
                if k == 0 and name != "gloo":
                    want = x + np.random.default_rng(1 - rank).standard_normal(n).astype(np.float32)
                    if not np.allclose(got, want, rtol=1e-5, atol=1e-5):
                        raise SystemExit(f"{mb} MB: the emulator's all-reduce ({name}) differs from NumPy's sum")
        rows.append((mb, {name: _summary(w[1:], c[1:]) for name, (w, c) in times.items()}))
    dist.destroy_process_group()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes-mb", type=int, nargs="+", default=[1, 4, 16, 64, 256])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--ab", action="store_true", help="also time the all-reduce as it was before (the A/B)")
    parser.add_argument("--polling", action="store_true",
                        help="also time ours polling gloo's call before it blocks (the A/B of polling.py alone)")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--rank", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = [str(mb) for mb in args.sizes_mb]
    if args.rank is not None:  # the second rank: no output of its own
        _rank_main(args.sizes_mb, args.runs, args.ab, args.polling)
        return 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2", JAX_PLATFORMS="cpu")
    other = subprocess.Popen([sys.executable, __file__, "--rank", "1", "--runs", str(args.runs), "--sizes-mb", *sizes,
                              *(["--ab"] if args.ab else []), *(["--polling"] if args.polling else [])],
                             env=dict(env, RANK="1"))
    os.environ.update(env, RANK="0")
    load = os.getloadavg()[0]
    wall, cpu = time.perf_counter(), time.process_time()
    rows = _rank_main(args.sizes_mb, args.runs, args.ab, args.polling)
    if other.wait(timeout=600) != 0:
        raise SystemExit("rank 1 failed")
    print(f"f32 all-reduce between 2 processes on localhost; median of {args.runs} runs after one warm-up, "
          f"alternating; load average {load:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs "
          f"(rank 0's times; {time.perf_counter() - wall:.0f} s wall, {time.process_time() - cpu:.0f} s CPU in all)")
    names = [name for name in rows[0][1] if name != "gloo"]
    print(f"{'size':>7} {'variant':>8} {'wall p50':>9} {'ratio':>6} {'mean':>8} {'ratio':>6} {'p25':>8} {'ratio':>6} "
          f"{'CPU p50':>8} {'ratio':>6}")
    from _results import Row, ratio_target, write_json

    out = []
    for mb, times in rows:
        peer = times["gloo"]
        for name in [*names, "gloo"]:
            t = times[name]
            cells = " ".join(f"{t[k] * 1e3:>6.2f}ms {t[k] / peer[k] if peer[k] else float('nan'):>5.2f}x"
                             for k in ("p50", "mean", "p25", "cpu"))
            print(f"{mb:>4} MB {name:>8} {cells}")
        ours = times["ours"]
        text, met = ratio_target(ours["p50"], peer["p50"], TARGET_RATIO)
        out.append(Row(SUITE, f"all-reduce {mb} MB f32, 2 processes", ours["p50"], "torch.distributed.all_reduce (gloo)",
                       peer["p50"], text, met))
    write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
