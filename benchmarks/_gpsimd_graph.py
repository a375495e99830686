"""GpSimd calls timed inside a real compiled graph: the main job's training step through torch_xla.

Why: benchmarks/gpsimd_call.py's other cases call `OpCall` the way a graph does, with a step's
gaps imitated by busy waits; this runs the graph itself. A process of its own (PJRT_DEVICE is
fixed per process) trains the main job's model (examples/mlp_training: the C++ ReLU, four
custom-calls per step) exactly as benchmarks/torch_xla_device.py does: batch to the device,
zero_grad, NLL loss, backward, SGD step, ``xm.mark_step()``, ``loss.item()``; the host's own
work between two graphs is that real work.

The timing is the benchmark's own, not the library's: after the warm-up the compiled step's
program is found among the live objects (neuron_customcall.pjrt.service.Program), and each
kernel-payload callable it holds (emulator.ops.kernel.GpSimdCall) gets a `TimedCall` in place of
its `OpCall`, and the program a `TimedExecutable` in place of its executable. A `TimedCall`
reads the host's clocks (perf_counter_ns, thread_time_ns: the thread that runs the graph) around
each call, and serves the call either by the `OpCall` (the isolated worker, as always) or by the
in-process floor of the same op (benchmarks._gpsimd_measure.InProcess): the same graph, steps and
gaps around the call, the kernel run here instead. The wrapper adds two clock reads and a Python
call per custom-call (well under a microsecond) to both modes alike.

Protocol: the driver writes ``MODE N`` lines (``worker`` or ``floor``, N steps); the process
answers each with one JSON line (see `_run`).
"""
from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODES = ("worker", "floor")


class TimedCall:
    """Stands in for one GpSimdCall's OpCall: times every call and serves it by the OpCall
    (mode "worker") or the in-process floor (mode "floor"); the first call after `check` is set
    is served by both and their results compared (the floor must compute what the worker does).
    Also keeps the host's gap before each call: from the end of the previous GpSimd call of any
    op (the gaps the worker plans its waits by, control.wait_plan)."""

    #: When the latest GpSimd call of the step ended (perf_counter ns; 0: none yet), for all ops.
    _ended = [0]

    def __init__(self, op_call: Any) -> None:
        from emulator.gpsimd.args import TensorSpec

        if any(kind != "tensor" for kind, _ in op_call.arguments):
            raise SystemExit(f"op {op_call.op.name}: the in-process floor takes tensor arguments only")
        self.op_call = op_call
        self._spec = TensorSpec
        self.floors: dict[tuple, Any] = {}
        self.mode = "worker"
        self.check = True
        self.walls: dict[str, list[int]] = {}
        self.cpus: dict[str, list[int]] = {}
        self.gaps: dict[str, list[int]] = {}

    @property
    def last(self) -> Any:
        """The OpCall's latest run (GpSimdCall reads its counters; a floor call leaves the
        worker's latest)."""
        return self.op_call.last

    def prime(self, graph: int, run: int) -> None:
        """The program's run-start hook (OpCall.prime): passed on while the worker serves the
        calls; the floor has no worker to wake."""
        if self.mode == "worker":
            self.op_call.prime(graph, run)

    def label(self, arrays: tuple[np.ndarray, ...]) -> str:
        shape = "x".join(str(d) for d in arrays[0].shape)
        return f"{self.op_call.op.name} {shape}"

    def _floor(self, arrays: tuple[np.ndarray, ...]) -> Any:
        from benchmarks._gpsimd_measure import InProcess
        from emulator import dtypes

        key = tuple((a.dtype, a.shape) for a in arrays)
        floor = self.floors.get(key)
        if floor is None:
            specs = [self._spec(dtypes.BY_NUMPY_GPSIMD[a.dtype].gpsimd, tuple(a.shape)) for a in arrays]
            floor = self.floors[key] = InProcess(self.op_call.runner.library_path, self.op_call.op, specs,
                                                 self.op_call.out)
        return floor

    def __call__(self, *operands: Any) -> np.ndarray:
        arrays = tuple(a if type(a) is np.ndarray else np.asarray(a) for a in operands)
        fn = self._floor(arrays) if self.mode == "floor" else self.op_call
        c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
        out = fn(*arrays)
        t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
        label = self.label(arrays)
        self.walls.setdefault(label, []).append(t1 - t0)
        self.cpus.setdefault(label, []).append(c1 - c0)
        if self._ended[0]:
            self.gaps.setdefault(label, []).append(t0 - self._ended[0])
        self._ended[0] = t1
        if self.check:
            self.check = False
            other = self.op_call(*arrays) if self.mode == "floor" else self._floor(arrays)(*arrays)
            if not np.array_equal(out, other):
                raise SystemExit(f"{label}: the in-process floor's result differs from the worker's")
        return out

    def take(self) -> tuple[dict[str, list[int]], dict[str, list[int]], dict[str, list[int]]]:
        """The calls timed since the last take: (walls, host CPU, gaps before) in ns by label."""
        walls, cpus, gaps = self.walls, self.cpus, self.gaps
        self.walls, self.cpus, self.gaps = {}, {}, {}
        return walls, cpus, gaps


class TimedExecutable:
    """Stands in for a Program's executable: times each run of the graph (wall, ns)."""

    def __init__(self, executable: Any) -> None:
        self.executable = executable
        self.runs: list[int] = []

    def run(self, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter_ns()
        try:
            return self.executable.run(*args, **kwargs)
        finally:
            self.runs.append(time.perf_counter_ns() - t0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.executable, name)


def _step_program() -> tuple[Any, list[Any]]:
    """The compiled program that holds GpSimd calls (the training step) and its GpSimdCalls."""
    from emulator.ops.kernel import GpSimdCall
    from neuron_customcall.pjrt import service

    found = []
    for obj in gc.get_objects():
        if type(obj) is service.Program:  # type(), not isinstance: no __class__ lookups of lazy objects
            calls = [v for v in obj.executable._loaded.shared.values() if isinstance(v, GpSimdCall)]
            if calls:
                found.append((obj, calls))
    if len(found) != 1:
        raise SystemExit(f"expected one compiled program with GpSimd calls (the step), found {len(found)}")
    return found[0]


def serve(warmup: int) -> None:
    """The process's side: builds the step, warms it up (compilation, the fused native code), installs
    the timing wrappers, then runs the driver's rounds."""
    from benchmarks.torch_xla_device import training_step

    step = training_step("NEURON")
    for _ in range(max(warmup, 2)):
        step()
    program, gpsimd_calls = _step_program()
    executable = program.executable
    deadline = time.monotonic() + 120  # the fused native code is built in a thread after 100 runs
    while executable._native_started and not executable.native and time.monotonic() < deadline:
        time.sleep(0.1)
    timed = []
    for call in gpsimd_calls:
        call._call = TimedCall(call._call)
        timed.append(call._call)
    program.executable = TimedExecutable(executable)
    runner = timed[0].op_call.runner
    if any(t.op_call.runner is not runner for t in timed):
        raise SystemExit("the step's GpSimd calls do not share one runner (one library, one worker)")
    print(json.dumps({"ready": True, "native": executable.native, "calls": len(timed)}), flush=True)
    for line in sys.stdin:
        mode, steps = line.split()
        if mode not in MODES:
            raise SystemExit(f"unknown mode {mode!r}")
        print(json.dumps(_run(step, timed, program.executable, runner, mode, int(steps))), flush=True)


def _run(step: Any, timed: list[TimedCall], executable: TimedExecutable, runner: Any, mode: str,
         steps: int) -> dict[str, Any]:
    """`steps` steps with the calls served in `mode`: each call's wall, host CPU and the host's
    gap before it (ns, by label), each step's wall and each graph run's wall (ns), this process's CPU (all threads)
    and the GpSimd worker's over the steps (ns), the counts of who waited how (WAITS) over the
    steps, the losses, and the worker's poll cap (s) the host chose before and after them."""
    from benchmarks._gpsimd_measure import task_cpu_ns, waits
    from emulator.gpsimd import control

    spin = control.worker_spin()
    for t in timed:
        t.mode = mode
        t.take()
    executable.runs.clear()
    walls = []
    pid = runner._worker.proc.pid
    own0, peer0, waits0 = time.process_time_ns(), task_cpu_ns(pid), waits(runner)
    losses = []
    for _ in range(steps):
        t0 = time.perf_counter_ns()
        losses.append(step())
        walls.append(time.perf_counter_ns() - t0)
    own, peer, waits1 = time.process_time_ns() - own0, task_cpu_ns(pid) - peer0, waits(runner)
    calls: dict[str, list[int]] = {}
    cpus: dict[str, list[int]] = {}
    gaps: dict[str, list[int]] = {}
    for t in timed:
        w, c, g = t.take()
        calls.update(w)
        cpus.update(c)
        gaps.update(g)
    if sorted(len(v) for v in calls.values()) != [steps] * 4:
        raise SystemExit(f"expected four GpSimd calls a step, timed {[(k, len(v)) for k, v in calls.items()]}")
    if not all(np.isfinite(losses)):
        raise SystemExit("the step's loss is not finite")
    return {"calls": calls, "cpus": cpus, "gaps": gaps, "steps": walls, "runs": list(executable.runs), "own_cpu": own,
            "peer_cpu": peer, "waits": [b - a for a, b in zip(waits0, waits1)], "losses": losses,
            "spin": [spin, control.worker_spin()]}


class GraphProcess:
    """The driver's side: the process that runs the step (started at once, so that its start-up and
    warm-up can overlap the driver's own set-up; `ready` waits for it)."""

    def __init__(self, warmup: int, spin: float | None = None) -> None:
        env = {**os.environ, "PJRT_DEVICE": "NEURON"}
        fixed = [] if spin is None else ["--spin", str(spin)]  # the worker's poll cap, as the driver's
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "gpsimd_call.py"), "--graph-serve",
                                      str(warmup), *fixed], cwd=ROOT, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.info: dict[str, Any] = {}

    def _answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:  # a library may print on stdout too: the answer is the next JSON object line
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the graph process exited (code {self.proc.wait()})")
            if line.startswith("{"):
                return json.loads(line)

    def ready(self) -> dict[str, Any]:
        if not self.info:
            self.info = self._answer()
        return self.info

    def steps(self, mode: str, n: int) -> dict[str, Any]:
        self.ready()
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{mode} {n}\n")
        self.proc.stdin.flush()
        return self._answer()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=120)
