"""Elided constants (`constant({...})`, values dropped by XLA's printer) compile where their values
are not needed, as the issue asks: when nothing reads them (dead code) and when only their shape is
asked for (`get-dimension-size` of a static dimension is folded to the size, as XLA's dynamic padder
does, so the constant is no longer read). Where the values are needed the compile error says how
to get them: XLA's parser fills such constants with garbage (a process-wide counter's bytes), so
XLA:CPU's answer is no meaning to follow (XLA's reshape_mover_test modules 1, 4, 6 and 7)."""
from __future__ import annotations

import pytest

import hlo
from neuron_customcall.compiler import CompileError, compile_module
from neuron_customcall.compiler.static_sizes import fold_static_dimension_sizes
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable
from tests.hlo.text.oracle import xla_parse
from tests.neuron_customcall.compiler.ours import assert_close, compile_proto, rand

SHAPE_ONLY = """
HloModule shape_only
ENTRY e {
  p = f32[2,3] parameter(0)
  unused = f32[2,3] constant({...})
  dead = f32[2,3] add(unused, p)
  big = f32[4,3] constant({...})
  rows = s32[] get-dimension-size(big), dimensions={0}
  cols = s32[] get-dimension-size(p), dimensions={1}
  n = s32[] multiply(rows, cols)
  ROOT t = (f32[2,3], s32[]) tuple(p, n)
}
"""


def test_elided_constants_whose_values_are_not_needed_compile():
    inputs = [rand(2, 3)]
    ours = compile_proto(hlo.load(SHAPE_ONLY).to_bytes()).run(inputs)
    assert_close(ours, XlaCpuExecutable(xla_parse(SHAPE_ONLY).SerializeToString()).run(inputs))
    assert int(ours[1]) == 12


def test_static_dimension_sizes_fold_and_dynamic_ones_are_left_to_the_padder():
    text = """
HloModule sizes
ENTRY e {
  p = f32[<=5,3] parameter(0)
  a = s32[] get-dimension-size(p), dimensions={0}
  b = s32[] get-dimension-size(p), dimensions={1}
  ROOT t = (s32[], s32[]) tuple(a, b)
}
"""
    folded = fold_static_dimension_sizes(hlo.load(text))
    ops = [o.opcode for o in folded.entry.root.operands]
    assert ops == ["get-dimension-size", "constant"]
    assert int(folded.entry.root.operands[1].constant_value()) == 3


@pytest.mark.parametrize("use", ["ROOT r = f32[2,3] add(c, p)", "ROOT r = f32[3,2] reshape(c)"])
def test_elided_constants_whose_values_are_needed_are_refused_with_the_way_out(use):
    text = f"HloModule m\nENTRY e {{\n  p = f32[2,3] parameter(0)\n  c = f32[2,3] constant({{...}})\n  {use}\n}}\n"
    with pytest.raises(CompileError, match=r"values of this constant were elided.*print_large_constants=True"):
        compile_module(hlo.load(text))
