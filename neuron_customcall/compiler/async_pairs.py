"""XLA's asynchronous pairs run synchronously: `async-start`/`async-update`/`async-done` (and the
shorthands `call-start`, `negate-start`, ... that XLA's parser turns into them) and
`copy-start`/`copy-done`.

Why synchronously: the emulated NeuronCore runs one instruction stream, so "start the wrapped
computation, overlap other work, wait for it" has the value of calling the computation where
it starts. XLA's meaning, which this keeps, is in the values: an async-start's result is
(operands, output, context...), an async-update passes it on, an async-done returns the output;
a copy-start's is (destination, source, context) with both equal to its operand, and copy-done
returns the destination. The context elements are opaque to HLO (XLA:CPU gives them no defined
value); reading one, or using a start's value other than through its update/done and its first
two elements, is a compile error naming the instruction, not a made-up value.

The pass rewrites a copy of the module: async-start -> tuple(operands) and a `call` of the wrapped
computation (inlined later like any call), done -> that call; the pairs are then dead code.
"""
from __future__ import annotations

from hlo.ir.convert import module_from_proto, module_to_proto
from hlo.ir.module import HloComputation, HloInstruction, HloModule
from neuron_customcall.compiler.errors import CompileError

#: opcodes that begin a pair, and those that pass its value on or end it
STARTS = frozenset({"async-start", "copy-start"})
UPDATES = frozenset({"async-update"})
DONES = frozenset({"async-done", "copy-done"})
PAIR_OPCODES = STARTS | UPDATES | DONES


def run_async_pairs_synchronously(module: HloModule) -> HloModule:
    """`module` itself when it has no asynchronous pair, else a rewritten copy (the caller's
    module is not changed)."""
    if not any(inst.opcode in PAIR_OPCODES for inst in module.instructions()):
        return module
    module = module_from_proto(module_to_proto(module))
    for comp in module.computations:
        if any(inst.opcode in PAIR_OPCODES for inst in comp.instructions):
            _rewrite(comp)
    return module


def _rewrite(comp: HloComputation) -> None:
    #: the value of element 0 and element 1 of each start (and update passing it on)
    parts: dict[HloInstruction, tuple[HloInstruction, HloInstruction]] = {}
    replaced: dict[HloInstruction, HloInstruction] = {}
    for inst in list(comp.instructions):  # a valid order: operands before users
        operands = [replaced.get(o, o) for o in inst.operands]
        if inst.opcode in STARTS:
            parts[inst] = _start(comp, inst, operands)
        elif inst.opcode in UPDATES or inst.opcode in DONES:
            if len(operands) != 1 or operands[0] not in parts:
                raise CompileError(f"{inst.opcode} needs the value of an async start (or update) of the same "
                                   "computation as its one operand", inst)
            if inst.opcode in UPDATES:
                parts[inst] = parts[operands[0]]
            else:
                # async-done returns the output (element 1), copy-done the destination (element 0)
                replaced[inst] = parts[operands[0]][1 if inst.opcode == "async-done" else 0]
        elif inst.opcode == "get-tuple-element" and operands and operands[0] in parts:
            index = inst.attributes.tuple_index
            if index not in (0, 1):
                raise CompileError(f"reads element {index} of {operands[0].opcode} {operands[0].name}: its "
                                   "context, which XLA leaves opaque (no value to give)", inst)
            replaced[inst] = parts[operands[0]][index]
        else:
            for o in operands:
                if o in parts:
                    raise CompileError(f"uses the value of {o.opcode} {o.name} whole; an asynchronous pair is "
                                       "supported through its update/done and elements 0 and 1 of its value", inst)
            inst.operands = operands
        inst.control_predecessors = [replaced.get(p, p) for p in inst.control_predecessors
                                     if p.opcode not in PAIR_OPCODES]
    root = replaced.get(comp.root, comp.root)
    if root in parts:
        raise CompileError(f"the computation returns the value of {root.opcode} {root.name} whole; an "
                           "asynchronous pair is supported through its update/done", root)
    comp.root = root


def _start(comp: HloComputation, start: HloInstruction,
           operands: list[HloInstruction]) -> tuple[HloInstruction, HloInstruction]:
    shape = start.shape
    if not shape.is_tuple or len(shape.tuple_shapes) < 2:
        raise CompileError(f"{start.opcode} needs a tuple result (operands, output, context...), has {shape}", start)
    if start.opcode == "copy-start":
        if len(operands) != 1:
            raise CompileError("copy-start takes one operand", start)
        return operands[0], operands[0]
    if len(start.called_computations) != 1:
        raise CompileError("async-start needs one wrapped computation", start)
    args = comp.add(HloInstruction(f"{start.name}.operands", "tuple", shape.tuple_shapes[0], list(operands)))
    call = comp.add(HloInstruction(f"{start.name}.call", "call", shape.tuple_shapes[1], list(operands),
                                   called_computations=list(start.called_computations)))
    for made in (args, call):
        made.attributes.metadata.CopyFrom(start.attributes.metadata)
    return args, call
