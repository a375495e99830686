"""The main job's training step through plain torch_xla: PJRT_DEVICE=NEURON against PJRT_DEVICE=CPU.

Ours: the training tutorial's MLP (64-120-84-10, batch 32, the digits) with the C++ ReLU
(examples/mlp_training/relu_ops.py: four custom-calls per step), on the emulated NeuronCore
through the neuron PJRT plugin. Peer: the same model with torch.relu on torch_xla's own PJRT CPU
device (XLA:CPU). Both run the step as the main job does: batch to the device, zero_grad, NLL
loss, backward, SGD step, ``xm.mark_step()``, then ``loss.item()``. Target: ours <= 1.3x (issue 11).

PJRT_DEVICE is fixed per process, so each side is a worker process of this script; the driver
makes them take turns (a round of steps on one, then the other), so that load from other
processes falls on both. Each round reports wall time and CPU time (the worker's and its
descendants', the GpSimd helpers included; the scheduler's per-thread nanosecond counters, read by
the driver), so that machine load can be told from work.
Both workers check that they computed the same first losses.
Run: ``python benchmarks/torch_xla_device.py [--quick] [--json PATH]``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._results import Row, ratio_target, write_json  # noqa: E402

SUITE = "Main job step through plain torch_xla: PJRT_DEVICE=NEURON vs PJRT_DEVICE=CPU (issue 11)"
WORKLOAD = "mlp_training: C++ ReLU MLP 64-120-84-10 SGD step + mark_step + item, batch 32"
AT_MOST = 1.3
_TICK = float(os.sysconf("SC_CLK_TCK"))
_SCHEDSTAT = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/schedstat")


def _task_seconds(pid: int) -> float:
    """CPU seconds of process `pid`'s live threads from the scheduler's nanosecond counters
    (/proc/PID/task/TID/schedstat: time on a CPU, the first field); 0 for a process gone."""
    total = 0.0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                total += int(f.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):  # the thread ended meanwhile
            continue
    return total


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds (user + system) of process `root` and its live descendants. Per thread from
    the scheduler's nanosecond counters: /proc/PID/stat's utime + stime come in 10 ms ticks,
    which over a round of 50 steps quantised a step's CPU time to 0.2 ms, coarser than the
    differences measured. The threads of a process all live for the whole run here (torch_xla's
    pools, the GpSimd worker); a thread that exited within a round would not be counted. Falls
    back to the ticks where schedstat is missing."""
    parents: dict[int, int] = {}
    ticks: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        fields = raw[raw.rfind(b")") + 2:].split()
        parents[int(entry)] = int(fields[1])
        ticks[int(entry)] = (int(fields[11]) + int(fields[12])) / _TICK
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        total += _task_seconds(pid) if _SCHEDSTAT else ticks.get(pid, 0.0)
        stack.extend(child for child, parent in parents.items() if parent == pid)
    return total


def training_step(device: str) -> Callable[[], float]:
    """The main job's training step on this process's PJRT device (`device`: NEURON, with the C++
    ReLU, or CPU, with torch.relu), as the main job runs it: each call trains on the next batch
    and returns the step's loss. Also used by benchmarks/_gpsimd_graph.py."""
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm

    sys.path.insert(0, str(ROOT / "examples" / "mlp_training"))
    import dataset
    import relu_ops
    from mlp import MLP

    data = dataset.digits()
    batches = [(torch.from_numpy(x), torch.from_numpy(y))
               for x, y in dataset.batches(data.x_train, data.y_train, 32, 0)]
    if device == "NEURON":
        relu_ops.build()
    dev = torch_xla.device()
    torch.manual_seed(0)
    model = MLP(relu_ops.relu if device == "NEURON" else torch.relu, input_size=data.features).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.NLLLoss()
    done = 0

    def step() -> float:
        nonlocal done
        xb, yb = batches[done % len(batches)]
        x, y = xb.to(dev), yb.to(dev)
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        xm.mark_step()
        done += 1
        return loss.item()

    return step


def worker(device: str) -> None:
    """Reads "steps N" lines, answers one JSON line per command: wall and CPU seconds, losses."""
    step = training_step(device)
    for line in sys.stdin:
        steps = int(line.split()[1])
        cpu0, wall0 = tree_cpu_seconds(os.getpid()), time.perf_counter()
        losses = [step() for _ in range(steps)]
        wall, cpu = time.perf_counter() - wall0, tree_cpu_seconds(os.getpid()) - cpu0
        print(json.dumps({"wall": wall, "cpu": cpu, "losses": losses}), flush=True)


class Worker:
    """A worker process on one PJRT device, driven over its stdin and stdout; `tree` runs another
    checkout's copy of this script (its own package on PYTHONPATH): a before/after comparison in
    one run, the rounds of both trees interleaved with the peer's."""

    def __init__(self, device: str, tree: Path | None = None):
        root = ROOT if tree is None else Path(tree).resolve()
        pythonpath = os.pathsep.join([str(root), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                                    if p and Path(p).resolve() != ROOT]])
        env = {**os.environ, "PJRT_DEVICE": device, "PYTHONPATH": pythonpath}
        self.device = device if tree is None else f"{device}@{tree}"
        self.proc = subprocess.Popen([sys.executable, str(root / "benchmarks" / Path(__file__).name), "--worker",
                                      device], cwd=root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)

    def steps(self, n: int) -> dict:
        """Runs `n` steps: the worker's answer, its "cpu" read here (the worker's tree, by this
        script's reader whichever tree the worker runs, so that a before/after pair is measured
        alike)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        cpu0 = tree_cpu_seconds(self.proc.pid)
        self.proc.stdin.write(f"steps {n}\n")
        self.proc.stdin.flush()
        while True:  # a library may print on stdout too: the answer is the next JSON object line
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the PJRT_DEVICE={self.device} worker exited (code {self.proc.wait()})")
            if line.startswith("{"):
                return {**json.loads(line), "cpu": tree_cpu_seconds(self.proc.pid) - cpu0}

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=120)


def measure(rounds: int, steps: int, against: Path | None = None, warmup: int = 0) -> dict[str, dict[str, float]]:
    """Per-step medians over alternating rounds, after a warm-up round (compilation) on each and
    `warmup` more steps (a hot program's fused native code is swapped in after
    NEURON_EMULATOR_NATIVE_AFTER runs, 100 by default). With `against`, that tree's NEURON worker
    takes its turn in every round too."""
    workers = [Worker("NEURON"), Worker("CPU")] + ([Worker("NEURON", against)] if against else [])
    try:
        first = [w.steps(3)["losses"] for w in workers]
        for losses in first[:1] + first[2:]:
            for a, b in zip(losses, first[1]):
                if abs(a - b) > 1e-4 * max(1.0, abs(b)):
                    raise AssertionError(f"the devices computed different losses: {first}")
        if warmup:
            for w in workers:
                w.steps(warmup)
        samples: dict[str, dict[str, list[float]]] = {w.device: {"wall": [], "cpu": []} for w in workers}
        for _ in range(rounds):
            for w in workers:
                r = w.steps(steps)
                samples[w.device]["wall"].append(r["wall"] / steps)
                samples[w.device]["cpu"].append(r["cpu"] / steps)
    finally:
        for w in workers:
            w.close()
    return {d: {k: statistics.median(v) for k, v in s.items()} for d, s in samples.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds of 5 steps instead of 10 of 50")
    parser.add_argument("--rounds", type=int, help="alternating rounds (overrides --quick)")
    parser.add_argument("--steps", type=int, help="steps per round (overrides --quick)")
    parser.add_argument("--json", metavar="PATH", help="also write the rows in the shared result format")
    parser.add_argument("--against", metavar="TREE", type=Path,
                        help="also run another checkout's NEURON worker in every round (before/after)")
    parser.add_argument("--warmup", type=int, default=150,
                        help="steps run on each device before the rounds (default 150: past the native swap)")
    parser.add_argument("--worker", choices=("NEURON", "CPU"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker)
        return 0
    rounds, steps = (3, 5) if args.quick else (10, 50)
    rounds, steps = args.rounds or rounds, args.steps or steps
    load = os.getloadavg()[0]
    m = measure(rounds, steps, args.against, args.warmup)
    ours, peer = m["NEURON"], m["CPU"]
    print(f"{WORKLOAD}; median per step over {rounds} alternating rounds of {steps} steps after {args.warmup} "
          f"of warm-up; "
          f"load average {load:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for device, side in m.items():
        if device == "CPU":
            continue
        name = "NEURON" if device == "NEURON" else f"NEURON of {args.against}"
        for label, key in (("wall", "wall"), ("CPU time", "cpu")):
            ratio = (f"{side[key] / peer[key]:6.2f}x" if peer[key] > 0
                     else "n/a (below /proc's 10 ms CPU tick: more --steps)")
            print(f"  {label:8s}  {name} {side[key] * 1e3:8.2f} ms   CPU {peer[key] * 1e3:8.2f} ms   ratio {ratio}")
    rows = []
    for label, key in (("wall time", "wall"), ("CPU time", "cpu")):
        if peer[key] > 0:  # a CPU time below one /proc tick has no ratio (printed as n/a above)
            target, met = ratio_target(ours[key], peer[key], AT_MOST)
            rows.append(Row(SUITE, f"{WORKLOAD}, {label}", ours[key], "torch.relu, torch_xla PJRT_DEVICE=CPU",
                            peer[key], target, met))
    write_json(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
