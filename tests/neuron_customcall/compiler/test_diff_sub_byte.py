"""Sub-byte integers (s4, u4, s2, u2), computed in 8 bits by the compiler
(neuron_customcall/compiler/subbyte.py), against XLA:CPU on the same modules: wrap-around
arithmetic, saturating float converts, wrapping integer converts, shifts that see the narrow bit
pattern, division edge cases, reductions, dots, loops and sorts over narrow values; popcnt
against its definition (XLA:CPU counts the bits of the sign-extended byte: popcnt(s4 -1) = -8);
refusals named (bitcast-convert of these types: test_diff_bitcast_convert_narrow.py)."""
from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

import emulator
import hlo
from neuron_customcall.compiler import CompileError, compile_module
from neuron_customcall.compiler.subbyte import widen_sub_byte_integers
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable

NARROW = {"s4": ml_dtypes.int4, "u4": ml_dtypes.uint4, "s2": ml_dtypes.int2, "u2": ml_dtypes.uint2}


def _all_pairs(t: str) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of values of the type, as two flat arrays."""
    info = ml_dtypes.iinfo(NARROW[t])
    values = range(int(info.min), int(info.max) + 1)
    pairs = list(itertools.product(values, values))
    return (np.array([p[0] for p in pairs], NARROW[t]), np.array([p[1] for p in pairs], NARROW[t]))


def _binary_module(t: str, n: int) -> str:
    signed = t.startswith("s")
    ops = ["add", "subtract", "multiply", "maximum", "minimum", "and", "or", "xor", "divide", "remainder",
           "shift-left", "shift-right-logical", "shift-right-arithmetic" if signed else "shift-right-logical"]
    lines = [f"  {op.replace('-', '_')}_{k} = {t}[{n}] {op}(a, b)" for k, op in enumerate(ops)]
    names = [f"{op.replace('-', '_')}_{k}" for k, op in enumerate(ops)]
    unary = ["negate", "not", "abs", "sign", "count-leading-zeros"] if signed else ["not", "count-leading-zeros"]
    lines += [f"  u_{k} = {t}[{n}] {op}(a)" for k, op in enumerate(unary)]
    names += [f"u_{k}" for k in range(len(unary))]
    lines.append(f"  lt = pred[{n}] compare(a, b), direction=LT")
    lines.append(f"  sel = {t}[{n}] select(lt, a, b)")
    names += ["lt", "sel"]
    result = ", ".join([f"{t}[{n}]"] * (len(names) - 2) + [f"pred[{n}]", f"{t}[{n}]"])
    body = "\n".join(lines)
    return (f"HloModule bin_{t}\nENTRY e_{t} {{\n  a = {t}[{n}] parameter(0)\n  b = {t}[{n}] parameter(1)\n"
            f"{body}\n  ROOT r = ({result}) tuple({', '.join(names)})\n}}")


def _converts_module(t: str, n: int) -> str:
    return f"""HloModule cvt_{t}
ENTRY e_cvt_{t} {{
  x = f32[{n}] parameter(0)
  w = s32[{n}] parameter(1)
  n = {t}[{n}] parameter(2)
  f = {t}[{n}] convert(x)
  i = {t}[{n}] convert(w)
  back = f32[{n}] convert(n)
  wide = s32[{n}] convert(n)
  io = {t}[{n}] iota(), iota_dimension=0
  ROOT r = ({t}[{n}], {t}[{n}], f32[{n}], s32[{n}], {t}[{n}]) tuple(f, i, back, wide, io)
}}"""


def _run_both(text: str, args: list[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    module = hlo.load(text)
    ours = emulator.load_artifact(compile_module(module)).run(args)
    ref = XlaCpuExecutable(module.to_bytes()).run(args)
    return ours, ref


def _assert_same(ours: list[np.ndarray], ref: list[np.ndarray]) -> None:
    assert len(ours) == len(ref)
    for k, (o, r) in enumerate(zip(ours, ref)):
        assert o.dtype == r.dtype, (k, o.dtype, r.dtype)
        if o.dtype.kind == "f":
            np.testing.assert_array_equal(o, r, err_msg=f"output {k}")
        else:
            np.testing.assert_array_equal(o.astype(np.int64), r.astype(np.int64), err_msg=f"output {k}")


@pytest.mark.parametrize("t", ["s4", "u4", "s2", "u2"])
def test_every_pair_of_values_matches_xla_cpu(t: str) -> None:
    a, b = _all_pairs(t)
    _assert_same(*_run_both(_binary_module(t, a.size), [a, b]))


@pytest.mark.parametrize("t", ["s4", "u4", "s2", "u2"])
def test_converts_saturate_from_floats_and_wrap_from_integers(t: str) -> None:
    x = np.array([-40.5, -9.0, -8.6, -2.5, -0.4, 0.0, 0.6, 2.5, 7.4, 7.6, 15.9, 16.2, 100.0, np.nan, np.inf, -np.inf],
                 np.float32)
    w = np.array([-300, -129, -17, -9, -8, -1, 0, 1, 7, 8, 15, 16, 17, 255, 256, 1000], np.int32)
    info = ml_dtypes.iinfo(NARROW[t])
    n = np.resize(np.arange(int(info.min), int(info.max) + 1), x.size).astype(NARROW[t])
    _assert_same(*_run_both(_converts_module(t, x.size), [x, w, n]))


REDUCE_DOT_LOOP = """HloModule rdl
add_s4 {
  x = s4[] parameter(0)
  y = s4[] parameter(1)
  ROOT s = s4[] add(x, y)
}
lt_s4 {
  x = s4[] parameter(0)
  y = s4[] parameter(1)
  ROOT c = pred[] compare(x, y), direction=LT
}
cond_s4 {
  p = (s32[], s4[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body_s4 {
  p = (s32[], s4[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  v = s4[3] get-tuple-element(p), index=1
  three = s4[] constant(3)
  tb = s4[3] broadcast(three), dimensions={}
  m = s4[3] multiply(v, tb)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT r = (s32[], s4[3]) tuple(j, m)
}
ENTRY e_rdl {
  a = s4[2,3] parameter(0)
  b = s4[3,2] parameter(1)
  z = s4[] constant(0)
  sum = s4[2] reduce(a, z), dimensions={1}, to_apply=add_s4
  d = s4[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  row = s4[1,3] slice(a), slice={[0:1], [0:3]}
  row1 = s4[3] reshape(row)
  i0 = s32[] constant(0)
  init = (s32[], s4[3]) tuple(i0, row1)
  loop = (s32[], s4[3]) while(init), condition=cond_s4, body=body_s4
  lv = s4[3] get-tuple-element(loop), index=1
  flat = s4[6] reshape(a)
  srt = s4[6] sort(flat), dimensions={0}, is_stable=true, to_apply=lt_s4
  ROOT r = (s4[2], s4[2,2], s4[3], s4[6]) tuple(sum, d, lv, srt)
}
"""


def test_reductions_dots_loops_and_sorts_match_xla_cpu() -> None:
    a = np.array([[7, 6, 5], [-8, -7, 3]], ml_dtypes.int4)
    b = np.array([[7, -8], [5, 3], [-1, 2]], ml_dtypes.int4)
    _assert_same(*_run_both(REDUCE_DOT_LOOP, [a, b]))


def test_popcnt_counts_the_narrow_bits() -> None:
    text = """HloModule pc
ENTRY e_pc {
  a = s4[16] parameter(0)
  u = u4[16] parameter(1)
  p = s4[16] popcnt(a)
  q = u4[16] popcnt(u)
  ROOT r = (s4[16], u4[16]) tuple(p, q)
}"""
    a = np.arange(-8, 8).astype(ml_dtypes.int4)
    u = np.arange(16).astype(ml_dtypes.uint4)
    p, q = emulator.load_artifact(compile_module(hlo.load(text))).run([a, u])
    bits = [bin(v & 0xF).count("1") for v in range(-8, 8)]
    np.testing.assert_array_equal(p.astype(np.int32), bits)
    np.testing.assert_array_equal(q.astype(np.int32), [bin(v).count("1") for v in range(16)])


def test_a_module_without_sub_byte_types_is_not_rewritten() -> None:
    module = hlo.load("HloModule plain\nENTRY e_plain {\n  a = s8[2] parameter(0)\n  ROOT n = s8[2] negate(a)\n}")
    assert widen_sub_byte_integers(module) is module


def test_the_callers_module_is_not_changed() -> None:
    module = hlo.load("HloModule keep\nENTRY e_keep {\n  a = s4[2] parameter(0)\n  ROOT n = s4[2] negate(a)\n}")
    before = module.to_bytes()
    compile_module(module)
    assert module.to_bytes() == before


@pytest.mark.parametrize("text, match", [
    ("HloModule tp\nENTRY e_tp {\n  p = (s4[2], f32[]) parameter(0)\n  ROOT g = s4[2] get-tuple-element(p), index=0\n}",
     "tuple-typed entry parameter holding a sub-byte"),
])
def test_what_has_no_8_bit_meaning_is_refused_by_name(text: str, match: str) -> None:
    with pytest.raises(CompileError, match=match):
        compile_module(hlo.load(text))
