"""The stateful random-number opcodes, `rng` and `rng-get-and-update-state`.

XLA leaves their values to the implementation (XLA:CPU's differ from call to call), so what is
compared with XLA:CPU is what XLA defines: the distribution, the interval, fresh values on every
run, and a state that advances by `delta`."""
from __future__ import annotations

import numpy as np
import pytest

import hlo
from neuron_customcall.compiler import CompileError, compile_module
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable
from tests.neuron_customcall.compiler.ours import compile_proto


def _rng_module(ty: str, a: str, b: str, dist: str, n: int = 200_000) -> bytes:
    return hlo.load(f"HloModule m\nENTRY e {{\n a = {ty}[] constant({a})\n b = {ty}[] constant({b})\n"
                    f" ROOT r = {ty}[{n}] rng(a, b), distribution={dist}\n}}").to_bytes()


@pytest.mark.parametrize("ty", ["f32", "f64", "bf16", "f16"])
def test_uniform_floats_cover_the_half_open_interval_like_xla_cpu(ty: str) -> None:
    proto = _rng_module(ty, "2", "3", "rng_uniform")
    exe = compile_proto(proto)
    first, second = exe.run([])[0], exe.run([])[0]
    ref = XlaCpuExecutable(proto).run([])[0]
    # XLA:CPU draws in f32 and rounds, so its bf16/f16 values reach b itself (about 1 in 130 for
    # bf16); ours keep the interval half-open, as XLA's operation semantics state it
    assert first.astype(np.float64).max() < 3 and ref.astype(np.float64).max() <= 3
    for x in (first, ref):
        x = x.astype(np.float64)
        assert x.min() >= 2
        assert abs(x.mean() - 2.5) < 0.01 and abs(x.std() - np.sqrt(1 / 12)) < 0.01
    assert first.dtype == ref.dtype
    assert not np.array_equal(first, second), "each run draws anew"


def test_uniform_integers_cover_the_half_open_interval_like_xla_cpu() -> None:
    proto = _rng_module("s32", "-3", "4", "rng_uniform", 70_000)
    ours, ref = compile_proto(proto).run([])[0], XlaCpuExecutable(proto).run([])[0]
    for x in (ours, ref):
        counts = np.bincount(x - -3, minlength=7)
        assert x.min() == -3 and x.max() == 3 and counts.min() > 9_000
    assert ours.dtype == ref.dtype == np.int32


def test_normal_has_mean_a_and_deviation_b_like_xla_cpu() -> None:
    proto = _rng_module("f32", "2", "3", "rng_normal")
    for x in (compile_proto(proto).run([])[0], XlaCpuExecutable(proto).run([])[0]):
        assert abs(x.mean() - 2) < 0.03 and abs(x.std() - 3) < 0.03


def test_rng_with_parameters_and_inside_a_loop_draws_fresh_values() -> None:
    text = """HloModule m
body {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  r = f32[8] rng(lo, hi), distribution=rng_uniform
  acc = f32[8] get-tuple-element(s), index=1
  n = f32[8] add(acc, r)
  ROOT t = (s32[], f32[8]) tuple(j, n)
}
cond {
  cs = (s32[], f32[8]) parameter(0)
  ci = s32[] get-tuple-element(cs), index=0
  k = s32[] constant(400)
  ROOT c = pred[] compare(ci, k), direction=LT
}
ENTRY e {
  z = s32[] constant(0)
  x = f32[8] parameter(0)
  w = (s32[], f32[8]) while((s32[], f32[8]) tuple(z, x)), condition=cond, body=body
  ROOT o = f32[8] get-tuple-element(w), index=1
}"""
    proto = hlo.load(text).to_bytes()
    zeros = np.zeros(8, np.float32)
    for sums in (compile_proto(proto).run([zeros])[0], XlaCpuExecutable(proto).run([zeros])[0]):
        assert np.all(np.abs(sums - 200) < 40), sums  # 400 fresh draws per element, mean 0.5


def test_state_advances_by_delta_on_every_run_like_xla_cpu() -> None:
    proto = hlo.load("HloModule m\nENTRY e {\n ROOT r = u64[2] rng-get-and-update-state(), delta=4\n}").to_bytes()
    for exe in (compile_proto(proto), XlaCpuExecutable(proto)):
        a, b, c = (exe.run([])[0] for _ in range(3))
        assert a.dtype == np.uint64 and a.shape == (2,)
        assert int(b[0]) - int(a[0]) == 4 and int(c[0]) - int(b[0]) == 4 and a[1] == b[1] == 0


@pytest.mark.parametrize("body, message", [
    (" a = f32[] constant(0)\n b = f32[2] constant({1, 2})\n ROOT r = f32[4] rng(a, b), distribution=rng_uniform",
     "rng parameters must be scalars"),
    (" a = pred[] constant(false)\n b = pred[] constant(true)\n ROOT r = pred[4] rng(a, b), distribution=rng_uniform",
     "float or integer"),
    (" ROOT r = u32[2] rng-get-and-update-state(), delta=1", "gives u64"),
])
def test_bad_shapes_are_compile_errors(body: str, message: str) -> None:
    with pytest.raises(CompileError, match=message):
        compile_module(hlo.load(f"HloModule m\nENTRY e {{\n{body}\n}}"))


_SEED_MODULE = 'HloModule s\nENTRY e {\n  ROOT s = u64[] custom-call(), custom_call_target="GetRngSeed"\n}'


def test_get_rng_seed_is_a_fresh_u64_on_every_run_like_xla_cpu() -> None:
    """XLA's GetRngSeed custom-call (XLA's rng expanders read their seed from it; XLA's constant
    folding test keeps it unfolded) returns the run's seed: u64[], new on every execution of
    XLA:CPU. Was refused ("custom-call target 'GetRngSeed' is not supported")."""
    proto = hlo.load(_SEED_MODULE).to_bytes()
    exe, ref = compile_proto(proto), XlaCpuExecutable(proto)
    ours = [exe.run([])[0] for _ in range(4)]
    theirs = [ref.run([])[0] for _ in range(4)]
    for values in (ours, theirs):
        assert all(v.dtype == np.uint64 and v.shape == () for v in values)
        assert len({int(v) for v in values}) == 4, "a new seed on every run"
    again = compile_proto(proto)
    assert [int(again.run([])[0]) for _ in range(4)] == [int(v) for v in ours], "reproducible from load to load"


def test_get_rng_seed_seeds_a_generator_in_the_graph() -> None:
    """The use XLA makes of it: the seed as the key of an rng-bit-generator state."""
    text = """HloModule s
ENTRY e {
  seed = u64[] custom-call(), custom_call_target="GetRngSeed"
  key = u64[1] reshape(seed)
  zero = u64[1] constant({0})
  state = u64[2] concatenate(key, zero), dimensions={0}
  g = (u64[2], u32[1000]) rng-bit-generator(state), algorithm=rng_three_fry
  ROOT bits = u32[1000] get-tuple-element(g), index=1
}"""
    exe = compile_proto(hlo.load(text).to_bytes())
    first, second = exe.run([])[0], exe.run([])[0]
    assert first.dtype == np.uint32 and not np.array_equal(first, second)
    assert abs(first.astype(np.float64).mean() / 2**32 - 0.5) < 0.05


@pytest.mark.parametrize("shape", ["u32[]", "u64[2]", "(u64[])"])
def test_get_rng_seed_of_another_shape_is_refused_by_name(shape: str) -> None:
    text = _SEED_MODULE.replace("u64[] custom-call()", f"{shape} custom-call()")
    with pytest.raises(CompileError, match="GetRngSeed takes no operand and returns u64"):
        compile_module(hlo.load(text))
