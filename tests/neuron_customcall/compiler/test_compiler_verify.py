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
