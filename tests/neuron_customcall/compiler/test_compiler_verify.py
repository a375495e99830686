"""The verifier before lowering: opcodes and operand counts from XLA's table (hlo.opcodes),
clear errors for opcodes the compiler does not lower."""
from __future__ import annotations

import pytest

import hlo
from neuron_customcall.compiler import CompileError, compile_module


def _module(body: str) -> hlo.HloModule:
    return hlo.load(f"HloModule m\nENTRY e {{\n  p = f32[2] parameter(0)\n{body}\n}}")


@pytest.mark.parametrize("body, message", [
    ("  ROOT n = f32[2] negate(p, p)", "negate takes 1 operands, got 2"),
    ("  ROOT n = f32[2] add(p)", "add takes 2 operands, got 1"),
    ("  ROOT n = f32[2] select(p, p)", "select takes 3 operands, got 2"),
    ("  ROOT n = f32[2] mulhi(p, p)", "opcode 'mulhi' is not supported by this compiler"),
])
def test_operand_counts_and_unsupported_opcodes_are_compile_errors(body, message):
    with pytest.raises(CompileError, match=message):
        compile_module(_module(body))


def test_an_opcode_xla_does_not_have_is_named():
    module = _module("  ROOT n = f32[2] negate(p)")
    module.entry.root.opcode = "frobnicate"  # as a forged proto could say
    with pytest.raises(CompileError, match="'frobnicate' is not an HLO opcode"):
        compile_module(module)


@pytest.mark.parametrize("body, message", [
    ("  ROOT n = f32[3] negate(p)", r"operand shape f32\[2\].* does not match the result"),
    ("  i = s32[2] parameter(1)\n  ROOT n = f32[2] add(p, i)", "operand element types differ"),
    ("  ROOT n = f32[2] compare(p, p), direction=LT", "compare must produce PRED"),
    ("  ROOT b = f32[3,2] broadcast(p), dimensions={0}", r"broadcast dimensions \[0\] do not map"),
    ("  ROOT t = f32[2] transpose(p), dimensions={1}", r"transpose \[1\] does not take"),
    ("  ROOT r = f32[3] reshape(p)", "changes the element count"),
    ("  ROOT s = f32[2] slice(p), slice={[0:1]}", r"slice of f32\[2\].* gives \[1\]"),
    ("  z = f32[] constant(0)\n  ROOT r = f32[2] reduce(p, z), dimensions={0}, to_apply=add",
     r"reduce over \[0\] .* does not give"),
])
def test_shape_rules_beside_the_lowerings_reject_bad_shapes(body, message):
    add = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
    text = f"HloModule m\n{add}ENTRY e {{\n  p = f32[2] parameter(0)\n{body}\n}}"
    with pytest.raises(CompileError, match=message):
        compile_module(hlo.load(text))


def test_every_shape_rule_is_for_an_opcode_the_compiler_lowers_or_an_elementwise_one():
    from hlo.opcodes import ELEMENTWISE, OPCODES
    from neuron_customcall.compiler.lowering import SHAPE_RULES, lowering_for

    for opcode in SHAPE_RULES:
        assert lowering_for(opcode) is not None or OPCODES[opcode].cls == ELEMENTWISE, opcode
