"""Profiling real compiled graphs: one event per executed instruction, engine tracks, a Chrome
trace that parses back with the fields Perfetto needs; loops cost their body times their
iterations; GpSimd (C++ ReLU) and NKI payloads appear on their engines; plain runs record
nothing."""
from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import pytest

import emulator
import hlo
from emulator.cost.engines import DMA, ENGINES, GPSIMD, NONE, TENSOR
from neuron_customcall.compiler import compile_module
from neuron_customcall.jax.primitive import neuron_lowering


def _mlp(x, w1, b1, w2):
    return jax.nn.softmax(jax.nn.relu(x @ w1 + b1) @ w2)


def _compile(f, *args):
    with neuron_lowering():  # kernel calls as Neuron custom-calls, not XLA:CPU host callbacks
        proto = jax.jit(f).lower(*args).compiler_ir("hlo").as_serialized_hlo_module_proto()
    return emulator.load_artifact(compile_module(hlo.load(proto)))


@pytest.fixture(scope="module")
def mlp():
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((64, 784), (784, 256), (256,), (256, 10))]
    return _compile(_mlp, *args), args


def _entry_instructions(exe):
    program = exe.artifact.program
    return program.computations[program.entry].instructions


def test_every_instruction_has_events_and_outputs_are_unchanged(mlp):
    exe, args = mlp
    plain = exe.run(args)
    outs, prof = exe.profile(args)
    np.testing.assert_array_equal(outs[0], plain[0])
    names = [i.name or i.op for i in _entry_instructions(exe)]
    assert [h.name for h in prof.host] == names
    assert set(names) == {e.name for e in prof.events}
    assert all(h.seconds >= 0 for h in prof.host)
    dot = [e for e in prof.events if e.op == "dot"]
    assert dot and all(e.engine == TENSOR and e.cycles > 0 for e in dot)
    busy = prof.busy_cycles()
    assert list(busy)[:len(ENGINES)] == list(ENGINES) and busy[TENSOR] > 0 and busy[DMA] > 0
    # Engines run in parallel: the makespan is at least the busiest engine, at most the sum.
    assert max(busy.values()) <= prof.total_cycles <= sum(busy.values())
    assert prof.total_seconds == pytest.approx(prof.total_cycles / prof.clock_hz)
    top = prof.top(3)
    assert top[0].op == "dot" and top[0].cycles >= top[1].cycles >= top[2].cycles
    assert "tensor" in prof.summary() and "dot" in prof.summary()


def test_schedule_respects_dependencies_and_engine_order(mlp):
    exe, args = mlp
    _, prof = exe.profile(args)
    by_engine: dict[str, list] = {}
    for e in prof.events:
        if e.engine != NONE:
            by_engine.setdefault(e.engine, []).append(e)
    for events in by_engine.values():  # an engine runs one instruction at a time
        events.sort(key=lambda e: e.start)
        assert all(a.end <= b.start + 1e-9 for a, b in zip(events, events[1:]))
    softmax_div = [e for e in prof.events if e.op == "divide"]
    dot_end = max(e.end for e in prof.events if e.op == "dot")
    assert softmax_div and all(e.start >= dot_end for e in softmax_div)


def test_chrome_trace_parses_back_with_perfetto_fields(mlp):
    exe, args = mlp
    _, prof = exe.profile(args)
    trace = json.loads(json.dumps(prof.to_chrome_trace()))
    events = trace["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert complete
    for e in complete:
        assert {"name", "ph", "ts", "dur", "pid", "tid", "args"} <= set(e)
        assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert set(ENGINES) <= set(threads.values()) and "instructions" in threads.values()
    device = [e for e in complete if e["cat"] != "host"]
    assert {threads[(e["pid"], e["tid"])] for e in device} == {e["cat"] for e in device}
    dot = next(e for e in device if e["args"]["op"] == "dot")
    assert dot["args"]["cycles"] > 0 and "f32[64,784]" in dot["args"]["shapes"]
    assert dot["dur"] == pytest.approx(dot["args"]["cycles"] / prof.clock_hz * 1e6)
    assert len([e for e in complete if e["cat"] == "host"]) == len(prof.host)


def test_run_without_profile_records_nothing(mlp):
    exe, args = mlp
    _, prof = exe.profile(args)
    n = len(prof.events)
    exe.run(args)
    exe.run(args, profile=False)
    assert len(prof.events) == n and exe.last_profile is prof
    exe.run(args, profile=True)
    assert exe.last_profile is not prof and len(exe.last_profile.events) == n


def test_loop_costs_its_body_times_its_iterations():
    def loop(x):
        return jax.lax.fori_loop(0, 5, lambda i, h: h * 2.0 + 1.0, x)

    x = np.ones((128, 64), np.float32)
    exe = _compile(loop, x)
    out, prof = exe.profile([x])
    np.testing.assert_allclose(out[0], np.asarray(loop(x)))
    multiplies = [e for e in prof.events if e.op == "multiply" and e.engine != NONE]
    assert len(multiplies) == 5 and len({e.cycles for e in multiplies}) == 1
    ends = sorted(e.end for e in multiplies)
    assert ends == sorted(set(ends))  # iterations follow each other


@pytest.fixture(scope="module")
def relu_ops():
    from tests.neuron_customcall.cpp import cpp_kernels

    cpp_kernels.load("relu")
    return "relu_ops"


def test_cpp_relu_mlp_has_gpsimd_costs_from_its_counters(relu_ops):
    from emulator.gpsimd.cost import estimate
    from emulator.ops.kernel import GpSimdCall
    from neuron_customcall.jax import cpp_call

    def f(x, w):
        return cpp_call("relu_ops::relu_forward", x @ w)

    rng = np.random.default_rng(1)
    args = [rng.standard_normal((32, 64)).astype(np.float32), rng.standard_normal((64, 128)).astype(np.float32)]
    exe = _compile(f, *args)
    out, prof = exe.profile(args)
    np.testing.assert_allclose(out[0], np.maximum(args[0] @ args[1], 0), rtol=1e-5, atol=1e-5)
    gpsimd = [e for e in prof.events if e.engine == GPSIMD]
    assert len(gpsimd) == 1 and gpsimd[0].op == "kernel"
    loaded = exe._profiling[0]
    call = next(c for c in loaded.shared.values() if isinstance(c, GpSimdCall))
    assert gpsimd[0].cycles > 0
    assert gpsimd[0].cycles == pytest.approx(estimate(call.last_counters, call.last_ncores).cycles)
    assert prof.busy_cycles()[GPSIMD] == gpsimd[0].cycles


def test_nki_kernel_costs_come_from_its_ir():
    from tests.neuron_customcall.kernels.seed_kernels import nki_tensor_add

    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((256, 1024)).astype(np.float32) for _ in range(2))
    exe = _compile(lambda a, b: nki_tensor_add(a, b) * 2.0, a, b)
    out, prof = exe.profile([a, b])
    np.testing.assert_allclose(out[0], (a + b) * 2.0, rtol=1e-6)
    kernel = [e for e in prof.events if e.op == "kernel"]
    assert {e.engine for e in kernel} >= {DMA, "vector"} and all(e.cycles > 0 for e in kernel)


def test_an_nki_kernels_instructions_are_laid_out_inside_its_event_on_each_engine():
    from tests.neuron_customcall.kernels import seed_kernels

    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((256, 1024)).astype(np.float32) for _ in range(2))
    exe = _compile(lambda a, b: seed_kernels.nki_tensor_add(a, b) * 2.0, a, b)
    _, prof = exe.profile([a, b])
    kernels = [e for e in prof.events if e.op == "kernel" and e.detail is None and e.engine != NONE]
    details = [e for e in prof.events if e.detail is not None]
    assert kernels and details
    for k in kernels:
        inside = [d for d in details if d.engine == k.engine and k.start <= d.start and d.end <= k.end + 1e-6]
        assert inside, k.engine
        assert sum(d.cycles for d in inside) == pytest.approx(k.cycles)  # the same cycles, per instruction
    ops = {(d.engine, d.op) for d in details}
    assert (DMA, "load") in ops and (DMA, "store") in ops and ("vector", "tensor_tensor") in ops
    source = Path(seed_kernels.__file__).name
    assert all(source in d.detail["line"] for d in details)  # each names its line in the kernel
    assert all(d.detail["executions"] == 4 for d in details)  # the 2 x 2 grid
    # totals count the kernel once, not its instructions again
    assert prof.busy_cycles()[DMA] == pytest.approx(sum(e.cycles for e in prof.events
                                                        if e.engine == DMA and e.detail is None))
    trace = prof.to_chrome_trace()["traceEvents"]
    nested = [t for t in trace if t.get("cat", "").endswith("(kernel instruction)")]
    assert len(nested) == len(details) and all("bytes" in t["args"] and "line" in t["args"] for t in nested)
