"""Verification before lowering: the opcode is XLA's and has a lowering here, its operand count
is XLA's (hlo.opcodes), no shape is dynamic, and the opcode's shape rule holds (each registered
beside its lowering, compiler/lowering/: the rules the handlers rely on). Linear time.

Two checks cut across opcodes and live here (issue 16: they corrupted data silently): the
result element type XLA's shape inference gives every opcode that has a rule for it (an add of
two f32 declared s32 is refused), and parameter numbering (0..n-1, each once: a parameter
numbered -1 silently reordered the inputs). A rule that trips over a malformed attribute (an
IndexError on a dimension number out of range) is a CompileError naming the instruction."""
from __future__ import annotations

from typing import Any

from hlo.opcodes import ELEMENTWISE, OPCODES
from neuron_customcall.compiler.errors import CompileError
from neuron_customcall.compiler.lowering import SHAPE_RULES, lowering_for
from neuron_customcall.compiler.lowering.registry import fail


def verify_instruction(inst: Any) -> None:
    try:
        _verify_instruction(inst)
    except CompileError:
        raise
    except (IndexError, KeyError, TypeError, ValueError, AttributeError) as e:
        # the rules index operand dimensions by attribute values; one out of range is malformed HLO
        fail(inst, f"malformed {inst.opcode}: {type(e).__name__}: {e}")


def _verify_instruction(inst: Any) -> None:
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
    _verify_element_type(inst)


_COMPLEX_PART = {"C64": "F32", "C128": "F64"}
_COMPLEX_OF = {"F32": "C64", "F64": "C128"}
_FREE_RESULT_TYPE = frozenset({"convert", "stochastic-convert"})


def _first(ops: list[Any]) -> str:
    return ops[0].element_type


def _second(ops: list[Any]) -> str:
    return ops[1].element_type


def _real_part(ops: list[Any]) -> str:
    return _COMPLEX_PART.get(ops[0].element_type, ops[0].element_type)


#: The result element type XLA's shape inference gives each opcode from its operands (opcodes
#: whose result type is free, such as convert, dot with a preferred type, iota or custom-call,
#: are absent). Array results only; tuple-valued opcodes are in _LEAF_TYPES.
_ELEMENT_TYPE = {
    **{op: _first for op, r in OPCODES.items()
       if r.cls == ELEMENTWISE and r.arity in (1, 2) and op not in _FREE_RESULT_TYPE},
    "abs": _real_part, "real": _real_part, "imag": _real_part, "is-finite": lambda ops: "PRED",
    "complex": lambda ops: _COMPLEX_OF.get(ops[0].element_type, "?"), "compare": lambda ops: "PRED",
    "select": _second, "clamp": _second,
    **{op: _first for op in ("broadcast", "reshape", "transpose", "slice", "reverse", "pad", "concatenate",
                             "dynamic-slice", "dynamic-update-slice", "gather", "reduce-precision",
                             "select-and-scatter")},
}

#: Operands that XLA requires to share one element type.
_SAME_OPERAND_TYPES = {"concatenate": slice(None), "select": slice(1, 3), "clamp": slice(0, 3),
                       "dynamic-update-slice": slice(0, 2)}


def _leaf_types(shape: Any) -> list[str]:
    return [leaf.element_type for leaf in shape.leaves()]


def _outputs(shape: Any) -> list[Any]:
    return list(shape.tuple_shapes) if shape.is_tuple else [shape]


#: Opcodes whose result leaves' element types follow from operand leaves: (want, got) lists.
_LEAF_TYPES = {
    "tuple": lambda inst, ops: ([t for o in ops for t in _leaf_types(o)], _leaf_types(inst.shape)),
    "get-tuple-element": lambda inst, ops: (
        _leaf_types(ops[0].tuple_shapes[inst.attributes.tuple_index]) if ops[0].is_tuple else [],
        _leaf_types(inst.shape)),
    "reduce": lambda inst, ops: ([o.element_type for o in ops[len(ops) // 2:]],
                                 [o.element_type for o in _outputs(inst.shape)]),
    "reduce-window": lambda inst, ops: ([o.element_type for o in ops[len(ops) // 2:]],
                                        [o.element_type for o in _outputs(inst.shape)]),
}


def _verify_element_type(inst: Any) -> None:
    ops, out = [o.shape for o in inst.operands], inst.shape
    leaves = _LEAF_TYPES.get(inst.opcode)
    if leaves is not None:
        want, got = leaves(inst, ops)
        if want != got:
            fail(inst, f"{inst.opcode} of {[str(o) for o in ops]} gives element types {want}, the result is {out}")
        return
    rule = _ELEMENT_TYPE.get(inst.opcode)
    if rule is None or out.is_tuple or not ops or any(o.is_tuple for o in ops):
        return
    want = rule(ops)
    if out.element_type != want:
        fail(inst, f"{inst.opcode} of {', '.join(o.element_type for o in ops)} gives {want}, the result is declared "
                   f"{out.element_type}")
    same = _SAME_OPERAND_TYPES.get(inst.opcode)
    if same is not None and len({o.element_type for o in ops[same]}) > 1:
        fail(inst, f"{inst.opcode} operand element types differ: {[o.element_type for o in ops]}")


def verify_parameters(comp: Any) -> None:
    """Parameters numbered 0..n-1, each once (the inputs' order is the numbering)."""
    params = comp.parameters
    numbers = [p.attributes.parameter_number for p in params]
    if numbers != list(range(len(params))):
        bad = next((p for p, n in zip(params, sorted(numbers)) if numbers.count(n) > 1 or not 0 <= n < len(params)),
                   params[0])
        fail(bad, f"computation {comp.name} numbers its {len(params)} parameters {sorted(numbers)}; "
                  f"they must be 0..{len(params) - 1}, each once")


def verify_computation(comp: Any, order: list[Any]) -> None:
    verify_parameters(comp)
    for inst in order:
        verify_instruction(inst)
