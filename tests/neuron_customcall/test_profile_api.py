"""neuron_customcall.profile: estimated trn1 time of a compiled graph from Python (what the
examples print), from a backend `Compiled`, an Executable or a .neff; seeded random inputs."""
from __future__ import annotations

import jax
import numpy as np

import hlo
from neuron_customcall.backend import compile_cached
from neuron_customcall.profile import estimated_seconds, profile, random_inputs


def test_estimated_seconds_of_a_compiled_mlp(tmp_path):
    def mlp(x, w):
        return jax.nn.relu(x @ w)

    args = [np.ones((32, 64), np.float32), np.ones((64, 16), np.float32)]
    proto = jax.jit(mlp).lower(*args).compiler_ir("hlo").as_serialized_hlo_module_proto()
    compiled = compile_cached(hlo.load(proto))
    seconds = estimated_seconds(compiled, args)
    assert 0 < seconds < 1e-3
    assert estimated_seconds(compiled.executable) == seconds  # shapes decide; data does not here
    neff = tmp_path / "m.neff"
    neff.write_bytes(compiled.artifact if isinstance(compiled.artifact, bytes) else compiled.artifact.read_bytes())
    prof = profile(neff)
    assert prof.total_seconds == seconds and prof.busy_cycles()["tensor"] > 0
    a, b = random_inputs(compiled.executable.manifest, seed=3), random_inputs(compiled.executable.manifest, seed=3)
    assert all(np.array_equal(x, y) and x.dtype == np.float32 for x, y in zip(a, b))


def _line_of(text: str) -> str:
    import inspect
    lines, first = inspect.getsourcelines(_mlp_with_lines)
    return f"{__file__}:{first + next(i for i, line in enumerate(lines) if text in line)}"


def _mlp_with_lines(x, w):
    h = x @ w
    return jax.nn.relu(h)


def test_profiles_name_the_user_source_line_of_each_instruction():
    """Issue 17: the trace has the HLO op names with their source lines (JAX's stack frames:
    the innermost frame outside jax and this package)."""
    args = [np.ones((32, 64), np.float32), np.ones((64, 16), np.float32)]
    proto = jax.jit(_mlp_with_lines).lower(*args).compiler_ir("hlo").as_serialized_hlo_module_proto()
    prof = profile(compile_cached(hlo.load(proto)))
    dot = next(e for e in prof.events if e.op == "dot")
    assert dot.source == _line_of("x @ w")
    trace = prof.to_chrome_trace()["traceEvents"]
    assert any(e.get("args", {}).get("source") == _line_of("x @ w") for e in trace if e.get("ph") == "X")
    assert any(e.get("args", {}).get("source") == _line_of("relu(h)") for e in trace
               if e.get("ph") == "X" and e.get("cat") == "host")
    summary = prof.summary()
    assert f"test_profile_api.py:{_line_of('x @ w').rsplit(':', 1)[1]}" in summary


def test_torch_xla_style_metadata_lines_reach_the_profile():
    """torch_xla (XLA_IR_DEBUG=1 XLA_HLO_DEBUG=1) writes source_file/source_line into each
    instruction's metadata; the constant of an inlined call takes its call's line."""
    text = """HloModule m
relu {
  p = f32[4] parameter(0)
  z = f32[] constant(0)
  b = f32[4] broadcast(z), dimensions={}
  ROOT r = f32[4] maximum(p, b)
}
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] multiply(x, x), metadata={op_type="aten__mul" source_file="/home/me/train.py" source_line=12}
  ROOT c = f32[4] call(y), to_apply=relu, metadata={source_file="/home/me/train.py" source_line=13}
}"""
    prof = profile(compile_cached(hlo.load(text)))
    by_op = {e.op: e.source for e in prof.events}
    assert by_op["multiply"] == "/home/me/train.py:12"
    assert by_op["maximum"] == "/home/me/train.py:13"
    assert "train.py:12" in prof.summary()
