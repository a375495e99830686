"""HLO opcode -> lowering function and shape rule: the registry the lowering modules fill with
`@lowers` and `@shape_rule` beside each definition.

A lowering takes (instruction, LowerCtx) and returns (emulator op, attributes); every HLO
instruction becomes exactly one emulator instruction (parameters become slots), which keeps
buffer assignment and error reporting one to one with the HLO. An opcode without a lowering of
its own whose emulator op has the same name, no attributes and the same arity (the element-wise
opcodes, select, tuple, ...) is lowered by `generic`: emulator ops take their HLO names
(emulator.program.ops), so no rename table is needed.

A shape rule takes the instruction and raises CompileError when its operand and result shapes
break XLA's rule for the opcode; the verifier runs it before lowering, so handlers can rely on it.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from emulator.program.ops import OPS
from hlo.opcodes import OPCODES
from neuron_customcall.compiler.errors import CompileError

Lowering = Callable[[Any, Any], tuple[str, dict]]
ShapeRule = Callable[[Any], None]

#: opcode -> its own lowering (opcodes lowered generically are not listed)
LOWERINGS: dict[str, Lowering] = {}
#: opcode -> its shape rule (beside the element-wise class rule in verify.py)
SHAPE_RULES: dict[str, ShapeRule] = {}


def _register(table: dict[str, Any], what: str, opcodes: tuple[str, ...]) -> Callable[[Any], Any]:
    def register(fn: Any) -> Any:
        for opcode in opcodes:
            if opcode not in OPCODES:
                raise KeyError(f"{what} for {opcode!r}, which is not an HLO opcode")
            if opcode in table:
                raise ValueError(f"opcode {opcode} has two {what}s")
            table[opcode] = fn
        return fn
    return register


def lowers(*opcodes: str) -> Callable[[Lowering], Lowering]:
    """Register the decorated function as the lowering of `opcodes`."""
    return _register(LOWERINGS, "lowering", opcodes)


def shape_rule(*opcodes: str) -> Callable[[ShapeRule], ShapeRule]:
    """Register the decorated function as the shape rule of `opcodes`."""
    return _register(SHAPE_RULES, "shape rule", opcodes)


def same_as_operand(inst: Any) -> None:
    """The shape rule of an instruction whose result is its one operand's value (domain,
    all-reduce-done): the same leaf types, tuples included."""
    (operand,), out = shapes(inst)
    if leaf_types(operand) != leaf_types(out):
        fail(inst, f"{inst.opcode} result {out} differs from its operand {operand}")


def _generic(inst: Any, ctx: Any) -> tuple[str, dict]:
    return inst.opcode, {}


def generic_applies(opcode: str) -> bool:
    """Whether `opcode` lowers to the emulator op of its name without attributes."""
    spec, record = OPS.get(opcode), OPCODES.get(opcode)
    return spec is not None and record is not None and not spec.attrs and spec.arity == record.arity


def lowering_for(opcode: str) -> Lowering | None:
    """The lowering of `opcode`: its own, else the generic one when it applies, else None."""
    fn = LOWERINGS.get(opcode)
    if fn is None and generic_applies(opcode):
        return _generic
    return fn


# -- helpers of shape rules ----------------------------------------------------------------------
def fail(inst: Any, msg: str) -> NoReturn:
    """Reject `inst` with a CompileError naming it."""
    raise CompileError(msg, inst)


def shapes(inst: Any) -> tuple[list[Any], Any]:
    """(operand shapes, result shape) of an instruction."""
    return [o.shape for o in inst.operands], inst.shape


def shape_dims(shape: Any) -> tuple[int, ...]:
    return tuple(shape.dimensions)


def leaf_types(shape: Any) -> list[tuple[str, tuple[int, ...]]]:
    """(element type, dimensions) of each leaf of a (tuple) shape."""
    return [(s.element_type, shape_dims(s)) for s in shape.leaves()]
