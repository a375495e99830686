"""Verification before lowering: the opcode is XLA's and has a lowering here, its operand count
is XLA's (hlo.opcodes), no shape is dynamic, and the opcode's shape rule holds (each registered
beside its lowering, compiler/lowering/: the rules the handlers rely on). Linear time."""
from __future__ import annotations

from typing import Any

from hlo.opcodes import OPCODES
from neuron_customcall.compiler.lowering import SHAPE_RULES, lowering_for
from neuron_customcall.compiler.lowering.registry import fail


def verify_instruction(inst: Any) -> None:
    op = inst.opcode
    record = OPCODES.get(op)
    if record is None:
        fail(inst, f"{op!r} is not an HLO opcode")
    if op != "parameter" and lowering_for(op) is None:
        fail(inst, f"opcode {op!r} is not supported by this compiler")
    if record.arity is not None and len(inst.operands) != record.arity:
        fail(inst, f"{op} takes {record.arity} operands, got {len(inst.operands)}")
    if any(any(leaf.is_dynamic_dimension) for leaf in inst.shape.leaves()):
        fail(inst, f"dynamic shapes are not supported ({inst.shape})")
    rule = SHAPE_RULES.get(op)
    if rule is not None:
        rule(inst)


def verify_computation(comp: Any, order: list[Any]) -> None:
    for inst in order:
        verify_instruction(inst)
