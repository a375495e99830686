"""The cost of one GpSimd (C++ custom op) call inside a compiled graph (issue 14: <= 25 us).

What a compiled graph executes per custom-call is `emulator.gpsimd.call.OpCall.__call__` (the
``kernel`` instruction's GpSimd payload): the main job's ReLU forward (32x120 fp32) and backward
(two 32x120 inputs). Measured in one run, interleaved round by round:

* ``worker``: the call as a graph makes it (isolated worker process, whose runtime answers
  prepared calls in its C loop), back to back and with host work between calls (NumPy dots of
  the step's sizes, about as long as the rest of a step's ``Program.run`` between two calls: the
  training-step pattern), and with a step's gaps between calls (the host busy for 1000, 40, 174
  and 38 us before the four calls of each step, as between the main job's four calls and its next
  step: where the worker's poll cap decides whether it polls through a gap or sleeps), and with
  a step's varying gaps (the same, with the gap between two steps drawn within 40% either side
  of 1000 us, as the host's own work between two graphs varies: where a plan made from the gap
  before misses);
* ``worker, the step's four ops``: the main job's four calls of a step in turn (forward 32x120,
  32x84, backward 32x84, 32x120), each its own op call as in a graph (the worker learns the gap
  after each separately; the cases above repeat one call, so with a step's gaps the worker
  sizes each poll by the gap before the previous call);
* ``worker, Python loop``: the same with a second worker of the same library that answers them
  in Python (``NEURON_CUSTOMCALL_GPSIMD_LOOP=python``, the loop before the C one);
* ``in-process floor``: the same request handled in this process (the library loaded here with
  ctypes, the kernel called on the same prepared arguments, inputs copied in and the output copied
  out as the call does): what isolation costs is the difference;
* ``bare pipe``: a 16-byte round trip to an echoing child process (blocking reads), the cost of
  two process wake-ups with no work;
* ``inside the main job's compiled graph``: not an imitation but the graph itself
  (benchmarks/_gpsimd_graph.py): a process of its own trains the main job's model through
  torch_xla on PJRT_DEVICE=NEURON (its step with four custom-calls, the host's own work between
  steps), and each GpSimd call the compiled program makes is timed from the host's clocks, served
  in turn by the worker and by the in-process floor of the same op, a round of each after every
  round of the cases above; with each mode's step time, the graph's run time and CPU per step.

Per case, over all its calls of every round: the median and 90th percentile of each call's wall
time, the median of each call's host CPU time (this thread's), and the worker's CPU per call (all
its threads, from /proc/<pid>/task/*/schedstat: read per round, so a mean per call, the median
over rounds; reading it per call would put a gap between calls). The mean wall time per call
(the median over rounds of each round's mean) is printed too: on a loaded machine it measures
the tail, where the per-call median shows the usual call.
The machine's load average is printed before and after, with the worker's poll cap the host
chose from its load (control.worker_spin); ``--spin US`` fixes the cap instead (both sides then
poll whatever the load: a measurement of the polls themselves, as for choosing the cap).

Run: ``python benchmarks/gpsimd_call.py [--quick] [--spin US] [--graph-steps N] [--json PATH]``.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import _gpsimd_graph  # noqa: E402
from benchmarks._gpsimd_measure import SHARES, WAITS, InProcess, task_cpu_ns, waits  # noqa: E402
from benchmarks._results import Row, write_json  # noqa: E402
from emulator.gpsimd import args as gargs, control  # noqa: E402
from emulator.gpsimd.call import OpCall  # noqa: E402
from emulator.gpsimd.library import HostLibrary  # noqa: E402
from emulator.gpsimd.runner import GpSimdRunner, runner_for  # noqa: E402
from emulator.gpsimd.worker import LOOP_ENV  # noqa: E402

SUITE = "GpSimd call inside a compiled graph: isolated worker vs in-process floor (issue 14)"
TARGET_US = 25.0
SHAPE = (32, 120)
RELU = ROOT / "examples" / "mlp_training"

_ECHO = r"""
import os, sys
r, w = int(sys.argv[1]), int(sys.argv[2])
while True:
    b = os.read(r, 16)
    if not b:
        break
    os.write(w, b)
"""


def build_library() -> Path:
    from neuron_customcall.cpp import build

    # per checkout: another worktree's run would rebuild it with its own runtime
    checkout = hashlib.sha256(str(ROOT).encode()).hexdigest()[:10]
    directory = Path(tempfile.gettempdir()) / f"neuron_customcall_bench_{os.getuid()}_{checkout}" / "relu"
    request = build.make_request("relu", [RELU / "relu.cpp"], [RELU / "shape.cpp"], directory, False, False, [])
    return build.build(request)


def python_loop_runner(path: Path) -> GpSimdRunner:
    """A runner of its own whose worker answers prepared calls in Python (the loop before the
    runtime's C loop), started now with the variable that selects it."""
    saved = os.environ.get(LOOP_ENV)
    os.environ[LOOP_ENV] = "python"
    try:
        runner = GpSimdRunner(path)
        runner.request({"cmd": "ping"}, 60)
    finally:
        if saved is None:
            del os.environ[LOOP_ENV]
        else:
            os.environ[LOOP_ENV] = saved
    assert runner._worker is not None and runner._worker.loop == "python"
    return runner


class Pipe:
    """A 16-byte round trip to an echoing child process."""

    def __init__(self) -> None:
        self.req_r, self.req_w = os.pipe()
        self.resp_r, self.resp_w = os.pipe()
        self.proc = subprocess.Popen([sys.executable, "-c", _ECHO, str(self.req_r), str(self.resp_w)],
                                     pass_fds=(self.req_r, self.resp_w))
        self.pid = self.proc.pid
        self.message = b"0123456789abcdef"

    def __call__(self, *arrays: np.ndarray) -> None:
        os.write(self.req_w, self.message)
        os.read(self.resp_r, 16)

    def close(self) -> None:
        for fd in (self.req_r, self.req_w, self.resp_r, self.resp_w):
            os.close(fd)
        self.proc.wait()


def host_work(a: np.ndarray, b: np.ndarray) -> None:
    """About what a training step's Program.run does between two GpSimd calls."""
    for _ in range(4):
        np.dot(a, b)


#: The host's work before each call of a training step, in us (the main job's gaps at best).
STEP_GAPS_US = (1000.0, 40.0, 174.0, 38.0)
#: How much the gap between two steps varies in the varying pattern: uniformly within this share
#: either side of it (the host's Python between two graphs, with its allocations and garbage
#: collections; the three gaps inside a graph are NumPy work and repeat).
STEP_GAP_VARIES = 0.4


def step_gaps(varies: float = 0.0) -> Callable[[], None]:
    """Busy waits of the next of `STEP_GAPS_US` at each call, in turn; the first (the gap between
    two steps) drawn uniformly within `varies` of it either side (a seeded draw: the same gaps in
    every run)."""
    gaps = [g * 1e-6 for g in STEP_GAPS_US]
    state = {"next": 0}
    rng = np.random.default_rng(1)

    def between() -> None:
        k = state["next"]
        state["next"] = (k + 1) % len(gaps)
        gap = gaps[k] * (1 + rng.uniform(-varies, varies)) if k == 0 and varies else gaps[k]
        end = time.perf_counter() + gap
        while time.perf_counter() < end:
            pass

    return between




class StepCalls:
    """The main job's four custom-calls of a training step, one after the other: the ReLU
    forward of its two hidden layers (32x120, then 32x84) and their backward in reverse order,
    each its own OpCall (so its own prepared call, as each custom-call of a graph is: the worker
    learns the gap after each one separately)."""

    def __init__(self, path: Path, host: HostLibrary, rng: np.random.Generator) -> None:
        self.calls: list[tuple[OpCall, tuple[np.ndarray, ...], np.ndarray]] = []
        for width, which in ((120, "forward"), (84, "forward"), (84, "backward"), (120, "backward")):
            spec = gargs.TensorSpec("float32", (SHAPE[0], width))
            x = rng.standard_normal((SHAPE[0], width), dtype=np.float32)
            if which == "forward":
                op = OpCall(str(path), host.descriptor.op("relu_forward"), [("tensor", None)], spec)
                self.calls.append((op, (x,), np.maximum(x, 0)))
            else:
                g = rng.standard_normal((SHAPE[0], width), dtype=np.float32)
                op = OpCall(str(path), host.descriptor.op("relu_backward"), [("tensor", None), ("tensor", None)], spec)
                self.calls.append((op, (g, x), np.where(x > 0, g, 0)))
        self.next = 0

    def check(self) -> bool:
        """Whether each of the four gives NumPy's result."""
        return all(np.array_equal(op(*inputs), expected) for op, inputs, expected in self.calls)

    def __call__(self) -> np.ndarray:
        op, inputs, _ = self.calls[self.next]
        self.next = (self.next + 1) % len(self.calls)
        return op(*inputs)


@dataclass
class Round:
    """One round of one case: each call's wall and host CPU time (ns), the peer's CPU (ns)
    over the round, and for a worker the counts of `WAITS` over the round."""

    walls: list[int]
    cpus: list[int]
    peer_ns: int
    waits: tuple[int, ...] = ()


def measure(fn: Callable[..., object], inputs: tuple, calls: int, pid: int | None,
            between: Callable[[], None] | None, counts: Callable[[], tuple[int, ...]] | None = None) -> Round:
    """Times `calls` calls one by one; with `between`, only the calls are timed (host work
    excluded), and the peer's CPU (which runs meanwhile, spinning or not) counts."""
    walls, cpus = [0] * calls, [0] * calls
    peer0 = task_cpu_ns(pid) if pid else 0
    waits0 = counts() if counts else ()
    for k in range(calls):
        if between is not None:
            between()
        c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
        fn(*inputs)
        t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
        walls[k], cpus[k] = t1 - t0, c1 - c0
    waits1 = counts() if counts else ()
    return Round(walls, cpus, (task_cpu_ns(pid) - peer0) if pid else 0,
                 tuple(b - a for a, b in zip(waits0, waits1)))


@dataclass(frozen=True)
class Summary:
    """One case's figures in us: per-call wall median and 90th percentile, the mean per call
    (median over rounds), per-call host CPU median, peer CPU per call (median over rounds)."""

    p50: float
    p90: float
    mean: float
    host_cpu: float
    peer_cpu: float

    @classmethod
    def of(cls, rounds: list[Round]) -> "Summary":
        walls = sorted(w for r in rounds for w in r.walls)
        cpus = [c for r in rounds for c in r.cpus]
        return cls(walls[len(walls) // 2] / 1e3, walls[min(len(walls) - 1, len(walls) * 9 // 10)] / 1e3,
                   statistics.median(sum(r.walls) / len(r.walls) for r in rounds) / 1e3,
                   statistics.median(cpus) / 1e3,
                   statistics.median(r.peer_ns / len(r.walls) for r in rounds) / 1e3)


def wait_shares(rounds: list[Round]) -> str:
    """`WAITS` over all rounds of a worker case: shares of calls, then preempted polls."""
    if not rounds[0].waits:
        return ""
    calls = sum(len(r.walls) for r in rounds)
    totals = [sum(r.waits[k] for r in rounds) for k in range(len(WAITS))]
    shares = "/".join(f"{100 * t / calls:.0f}" for t in totals[:SHARES])
    rest = totals[SHARES:]
    return f"{shares}; {rest[0]}+{rest[1]}; {rest[2]}+{rest[3]}"


def graph_rounds(answers: list[dict]) -> dict[str, list[Round]]:
    """One graph mode's answers (benchmarks._gpsimd_graph._run) as Rounds by call label, and over
    the four calls of a step ("all four"); the GpSimd worker's CPU over a round shared by its calls."""
    rounds: dict[str, list[Round]] = {}
    for a in answers:
        calls = sum(len(v) for v in a["calls"].values())
        for label in a["calls"]:
            walls, cpus = a["calls"][label], a["cpus"][label]
            rounds.setdefault(label, []).append(Round(walls, cpus, a["peer_cpu"] * len(walls) // calls))
        rounds.setdefault("all four", []).append(
            Round([w for v in a["calls"].values() for w in v], [c for v in a["cpus"].values() for c in v],
                  a["peer_cpu"], tuple(a["waits"])))
    return rounds


#: The main job's four calls of a step, in their order.
STEP_ORDER = ("relu_forward 32x120", "relu_forward 32x84", "relu_backward 32x84", "relu_backward 32x120")


def report_graph(in_graph: dict[str, list[dict]], info: dict, steps: int) -> list[Row]:
    """Prints the calls timed inside the main job's compiled graph, each mode's step and graph run
    times and CPU, and gives a row per call (the worker against the in-process floor)."""
    answers = in_graph["worker"]
    print(f"  inside the main job's compiled graph (torch_xla, PJRT_DEVICE=NEURON; its training step, the host's "
          f"own work between steps; {len(answers)} rounds x {steps} steps a mode, interleaved; fused native code "
          f"{'on' if info.get('native') else 'off'}): each call's wall and host CPU from the host's clocks around "
          "the call the graph makes, served by the worker or by the in-process floor")
    caps = [c * 1e6 for a in answers for c in a["spin"]]
    print(f"  the graph process's worker poll cap over its worker rounds (the host's choice from its load, or --spin): "
          f"{min(caps):.0f}-{max(caps):.0f} us")
    print("  us per call as above, and the host's gap before the call (from the end of the step's previous GpSimd "
          "call, the previous step's last for the first): p10, p50, p90")
    print(f"  {'call':31s} {'served by':21s} {'p50':>7s} {'p90':>7s} {'mean':>7s} {'host CPU':>9s} {'peer CPU':>9s}"
          f"  {'gap before':>20s}  waits (the worker's, over the four)")
    rounds = {mode: graph_rounds(in_graph[mode]) for mode in _gpsimd_graph.MODES}
    summaries = {mode: {label: Summary.of(r) for label, r in by_label.items()} for mode, by_label in rounds.items()}
    for label in (*STEP_ORDER, "all four"):
        for mode in _gpsimd_graph.MODES:
            s = summaries[mode][label]
            served = "the worker" if mode == "worker" else "the in-process floor"
            shares = wait_shares(rounds[mode][label]) if mode == "worker" else ""
            gaps = sorted(g for a in in_graph[mode] for key, v in a["gaps"].items() if label in (key, "all four")
                          for g in v)
            spread = " ".join(f"{gaps[min(len(gaps) - 1, len(gaps) * q // 10)] / 1e3:6.0f}" for q in (1, 5, 9))
            print(f"  {label:31s} {served:21s} {s.p50:7.1f} {s.p90:7.1f} {s.mean:7.1f} {s.host_cpu:9.1f} "
                  f"{s.peer_cpu:9.1f}  {spread:>20s}  {shares}")
    print("  per step, us: wall p50 and p90 (the step: batch, forward and backward traced, mark_step, item), "
          "the graph's run p50, CPU per step (this process, all threads + the GpSimd worker; median over rounds)")
    for mode in _gpsimd_graph.MODES:
        a = in_graph[mode]
        walls = sorted(w for r in a for w in r["steps"])
        runs = sorted(w for r in a for w in r["runs"])
        cpu = statistics.median((r["own_cpu"] + r["peer_cpu"]) / len(r["steps"]) for r in a)
        own = statistics.median(r["own_cpu"] / len(r["steps"]) for r in a)
        served = "the worker" if mode == "worker" else "the in-process floor"
        p90 = walls[min(len(walls) - 1, len(walls) * 9 // 10)]
        print(f"  calls served by {served:21s} step {walls[len(walls) // 2] / 1e3:8.1f} {p90 / 1e3:8.1f}  "
              f"graph run {runs[len(runs) // 2] / 1e3:8.1f}  CPU {cpu / 1e3:8.1f} (host {own / 1e3:.1f})")
    rows = []
    for label in (*STEP_ORDER, "all four"):
        ours, floor = summaries["worker"][label].p50, summaries["floor"][label].p50
        which = "the main job's four ReLU calls" if label == "all four" else f"ReLU {label.split('_')[1]}"
        rows.append(Row(SUITE, f"{which} per call, inside the main job's compiled graph (torch_xla)", ours * 1e-6,
                        "the same call in-process, in the same graph", floor * 1e-6, f"<= {TARGET_US:g} us per call",
                        ours <= TARGET_US))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and calls, to check the script")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--spin", type=float, metavar="US",
                        help="the worker's poll cap in us, whatever the load (default: the host's choice)")
    parser.add_argument("--graph-steps", type=int, default=200,
                        help="training steps of the main job's compiled graph per mode and round")
    parser.add_argument("--graph-warmup", type=int, default=150,
                        help="steps before the graph's rounds (default 150: past the fused native code's swap)")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--graph-serve", type=int, metavar="WARMUP", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.spin is not None:
        control.may_poll = lambda: True  # type: ignore[assignment]  # the host polls too
        control.worker_spin = lambda: args.spin * 1e-6  # type: ignore[assignment]
    if args.graph_serve is not None:
        _gpsimd_graph.serve(args.graph_serve)
        return
    if args.quick:
        args.rounds, args.calls, args.graph_steps = 3, 200, 40
    load_before = os.getloadavg()
    spin_before = control.worker_spin()
    graph = _gpsimd_graph.GraphProcess(args.graph_warmup, args.spin)  # its start-up overlaps this set-up
    path = build_library()
    host = HostLibrary(path)
    spec = gargs.TensorSpec("float32", SHAPE)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(SHAPE, dtype=np.float32)
    g = rng.standard_normal(SHAPE, dtype=np.float32)
    forward = OpCall(str(path), host.descriptor.op("relu_forward"), [("tensor", None)], spec)
    backward = OpCall(str(path), host.descriptor.op("relu_backward"), [("tensor", None), ("tensor", None)], spec)
    python_runner = python_loop_runner(path)
    forward_py = OpCall(str(path), host.descriptor.op("relu_forward"), [("tensor", None)], spec)
    backward_py = OpCall(str(path), host.descriptor.op("relu_backward"), [("tensor", None), ("tensor", None)], spec)
    forward_py._runner = backward_py._runner = python_runner
    floor_f = InProcess(path, host.descriptor.op("relu_forward"), [spec], spec)
    floor_b = InProcess(path, host.descriptor.op("relu_backward"), [spec, spec], spec)
    step = StepCalls(path, host, rng)
    if not step.check():
        raise SystemExit("the step's four ReLU calls: a result differs from NumPy's")
    expected_f, expected_b = np.maximum(x, 0), np.where(x > 0, g, 0)
    for label, got, expected in (("worker forward", forward(x), expected_f), ("floor forward", floor_f(x), expected_f),
                                 ("worker backward", backward(g, x), expected_b),
                                 ("floor backward", floor_b(g, x), expected_b),
                                 ("Python loop forward", forward_py(x), expected_f),
                                 ("Python loop backward", backward_py(g, x), expected_b)):
        if not np.array_equal(got, expected):
            raise SystemExit(f"{label}: the ReLU's result differs from NumPy's")
    native = runner_for(str(path))._worker
    if native.loop != "native":
        raise SystemExit("the library's worker has no C loop (built by an older runtime?)")
    worker_pid, python_pid = native.proc.pid, python_runner._worker.proc.pid
    pipe = Pipe()
    a = rng.standard_normal((32, 64), dtype=np.float32)
    b = rng.standard_normal((64, 120), dtype=np.float32)
    work = lambda: host_work(a, b)  # noqa: E731
    t0 = time.perf_counter()
    for _ in range(200):
        work()
    work_us = (time.perf_counter() - t0) / 200 * 1e6
    graph_info = graph.ready()
    native_counts = lambda: waits(forward.runner)  # noqa: E731
    python_counts = lambda: waits(python_runner)  # noqa: E731
    cases = [
        ("worker, forward", forward, (x,), worker_pid, native_counts),
        ("worker, backward", backward, (g, x), worker_pid, native_counts),
        ("worker, the step's four ops", step, (), worker_pid, native_counts),
        ("worker, Python loop, forward", forward_py, (x,), python_pid, python_counts),
        ("worker, Python loop, backward", backward_py, (g, x), python_pid, python_counts),
        ("in-process floor, forward", floor_f, (x,), None, None),
        ("in-process floor, backward", floor_b, (g, x), None, None),
        ("bare pipe round trip", pipe, (), pipe.pid, None),
    ]
    results: dict[tuple[str, str], list[Round]] = {}
    in_graph: dict[str, list[dict]] = {mode: [] for mode in _gpsimd_graph.MODES}
    for k in range(args.rounds):
        for pattern, between in (("back to back", None), ("host work between", work), ("a step's gaps", step_gaps()),
                                 ("a step's varying gaps", step_gaps(STEP_GAP_VARIES))):
            for label, fn, inputs, pid, counts in cases:
                results.setdefault((label, pattern), []).append(
                    measure(fn, inputs, args.calls, pid, between, counts))
        for mode in _gpsimd_graph.MODES[::1 if k % 2 == 0 else -1]:  # each mode first in every other round
            in_graph[mode].append(graph.steps(mode, args.graph_steps))
    late_us = native.control.words[control.WORKER_LATE] / 1e3
    pipe.close()
    python_runner.close()
    graph.close()
    load_after = os.getloadavg()
    spin_after = control.worker_spin()
    print(f"GpSimd call, ReLU {SHAPE[0]}x{SHAPE[1]} fp32 (the main job's), {args.rounds} rounds x {args.calls} calls, "
          f"interleaved; host work between calls: {work_us:.0f} us of NumPy dots")
    chosen = "fixed by --spin" if args.spin is not None else "the host's choice from its load"
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}; {os.cpu_count()} CPUs; "
          f"worker's poll cap ({chosen}): {spin_before * 1e6:.0f} us before, {spin_after * 1e6:.0f} us after")
    print("  us per call: wall p50 and p90 over all calls, mean (median over rounds), host CPU p50, "
          "peer CPU (mean per round, median)")
    print("  waits (workers): % of calls where the host slept / woke the worker / the worker slept / its "
          "poll found the call / it slept until just before the expected call / it found the host on its CPU / "
          "it followed no plan (the gap's plans had been missing) / a graph run's prime had it poll for the call; "
          "polls stopped as preempted, worker + host; stalls polled through, worker + host")
    print(f"  {'case':31s} {'pattern':21s} {'p50':>7s} {'p90':>7s} {'mean':>7s} {'host CPU':>9s} {'peer CPU':>9s}"
          "  waits")
    medians: dict[tuple[str, str], float] = {}
    for (label, pattern), rounds in results.items():
        summary = Summary.of(rounds)
        medians[(label, pattern)] = summary.p50
        print(f"  {label:31s} {pattern:21s} {summary.p50:7.1f} {summary.p90:7.1f} {summary.mean:7.1f} "
              f"{summary.host_cpu:9.1f} {summary.peer_cpu:9.1f}  {wait_shares(rounds)}")
    out = []
    for pattern in ("back to back", "host work between", "a step's gaps", "a step's varying gaps"):
        for which in ("forward", "backward"):
            ours, floor = medians[(f"worker, {which}", pattern)], medians[(f"in-process floor, {which}", pattern)]
            out.append(Row(SUITE, f"ReLU {which} 32x120 per call, {pattern}", ours * 1e-6,
                           "the same request in-process", floor * 1e-6, f"<= {TARGET_US:g} us per call",
                           ours <= TARGET_US))
    for pattern in ("a step's gaps", "a step's varying gaps"):
        ours, floor = medians[("worker, the step's four ops", pattern)], medians[("in-process floor, forward", pattern)]
        out.append(Row(SUITE, f"the main job's four ReLU calls per call, {pattern}", ours * 1e-6,
                       "the forward request in-process", floor * 1e-6, f"<= {TARGET_US:g} us per call",
                       ours <= TARGET_US))
    print(f"  the worker's estimate of how late its timed sleeps end: {late_us:.1f} us")
    out += report_graph(in_graph, graph_info, args.graph_steps)
    print(f"  target: <= {TARGET_US:g} us per call inside a graph")
    write_json(args.json, out)


if __name__ == "__main__":
    main()
