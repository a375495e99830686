"""Dynamic shapes across while, conditional and call (the dynamic padder's control-flow handlers).

XLA's semantics (its dynamic dimension inference): a dynamic size crosses into a called
computation beside the array it belongs to. A `while` carries the sizes of its state's dynamic
dimensions as extra elements of the loop tuple, so a body may change them (a stack that grows by
one per iteration); a `conditional` passes each branch its operand's sizes and returns the sizes of
the result's dynamic dimensions from every branch (a branch whose result is static there gives the
bound). Here the called computations are rewritten as copies (a computation called from two places
may see different sizes), each run through the same padder with its parameters' sizes seeded, and
a `call` (or a fusion, which computes like one) is inlined into its caller, as the compiler inlines
calls anyway.

A size is carried for each dimension that is dynamic in the loop's initial value or declared
dynamic in its shape, and for any the body makes dynamic (found by rewriting the body again).
"""
from __future__ import annotations

from typing import Any

from hlo.ir.module import HloComputation, HloInstruction
from hlo.ir.shape import Shape
from neuron_customcall.compiler.dynamic_padder import (Padder, Size, Sizes, _static, _static_sizes, clone_computation,
                                                       handles)
from neuron_customcall.compiler.errors import CompileError
from neuron_customcall.compiler.schedule import schedule

#: a dynamic dimension of a (possibly nested) tuple: (the leaf's tuple index path, the dimension)
Slot = tuple[tuple[int, ...], int]


def dynamic_slots(sizes: Sizes, path: tuple[int, ...] = ()) -> list[Slot]:
    """The slots whose size is a run-time value."""
    out: list[Slot] = []
    for k, s in enumerate(sizes):
        if isinstance(s, tuple):
            out += dynamic_slots(s, path + (k,))
        elif isinstance(s, HloInstruction):
            out.append((path, k))
    return out


def declared_slots(shape: Shape, path: tuple[int, ...] = ()) -> list[Slot]:
    """The slots a shape declares dynamic (`<=N`)."""
    if shape.is_tuple:
        return [s for k, sub in enumerate(shape.tuple_shapes) for s in declared_slots(sub, path + (k,))]
    return [(path, d) for d, flag in enumerate(shape.is_dynamic_dimension) if flag]


def size_at(sizes: Sizes, slot: Slot) -> Size:
    path, dim = slot
    for k in path:
        sizes = sizes[k]  # type: ignore[assignment]
    return sizes[dim]  # type: ignore[return-value]


def with_sizes(sizes: Sizes, slots: list[Slot], values: list[Size]) -> Sizes:
    """`sizes` with the size of each slot replaced by its value."""
    def put(s: Sizes, path: tuple[int, ...], dim: int, value: Size) -> Sizes:
        if not path:
            return s[:dim] + (value,) + s[dim + 1:]  # type: ignore[operator]
        k = path[0]
        return s[:k] + (put(s[k], path[1:], dim, value),) + s[k + 1:]  # type: ignore[arg-type, operator]

    for slot, value in zip(slots, values):
        sizes = put(sizes, slot[0], slot[1], value)
    return sizes


class PaddedCallee:
    """A rewritten copy of a called computation: its padder, its root's value and sizes."""

    def __init__(self, caller: Padder, comp: HloComputation, slots: list[list[Slot]]) -> None:
        taken = {c.name for c in caller.module.computations}
        k = 1
        while f"{comp.name}.dyn{k}" in taken:
            k += 1
        self.comp, _ = clone_computation(comp, f"{comp.name}.dyn{k}")
        caller.module.add(self.comp)
        self.padder = Padder(self.comp, caller.module)
        old_root = self.comp.root
        for param in list(self.comp.parameters):
            n = param.attributes.parameter_number
            own = slots[n] if n < len(slots) else []
            shape = _static(param.shape)
            if not own:
                param.shape = shape
                self.padder.seed(param, param, _static_sizes(shape))
                continue
            wrapped = HloInstruction(f"{param.name}.sizes", "parameter",
                                     _wrapped_shape(shape, len(own)))
            wrapped.attributes.CopyFrom(param.attributes)
            self.comp.instructions.remove(param)
            self.comp.add(wrapped)
            self.padder.base = param
            value, sizes = self.padder.unwrap(wrapped, shape, len(own))
            self.padder.seed(param, value, with_sizes(_static_sizes(shape), own, list(sizes)))
        self.padder.run(schedule(self.comp))
        self.value = self.padder.v(old_root)
        self.sizes = self.padder.s(old_root)
        self.padder.base = old_root

    def finish(self, slots: list[Slot]) -> None:
        """Make the root the result followed by the sizes of `slots` (none: the result alone)."""
        self.comp.root = self.padder.wrap(self.value, [size_at(self.sizes, s) for s in slots]) if slots else self.value
        self.comp.instructions = schedule(self.comp)

    def drop(self) -> None:
        self.comp.module.computations.remove(self.comp)


def _wrapped_shape(shape: Shape, count: int) -> Shape:
    parts = list(shape.tuple_shapes) if shape.is_tuple else [shape]
    return Shape.tuple_of(parts + [Shape.array("S32", ())] * count)


def _sorted(slots: Any) -> list[Slot]:
    return sorted(set(slots))


@handles("while")
def _while(p: Padder, inst: HloInstruction, ops: list[HloInstruction]) -> tuple[HloInstruction, Sizes]:
    assert p.declared is not None
    comps = list(inst.called_computations)
    if len(comps) != 2:
        raise CompileError("a while needs a body and a condition", inst)
    # XLA orders them (body, condition); the condition returns pred (as the while's lowering reads them)
    cond_k = 1 if comps[1].root.shape.element_type == "PRED" else 0
    body, cond = comps[1 - cond_k], comps[cond_k]
    init_sizes = p.s(ops[0])
    slots = _sorted(dynamic_slots(init_sizes) + declared_slots(p.declared))
    while True:
        padded = PaddedCallee(p, body, [slots])
        grown = _sorted(slots + dynamic_slots(padded.sizes))
        if grown == slots:
            break
        padded.drop()  # the body made another dimension dynamic: carry its size too, and redo
        slots = grown
    padded.finish(slots)
    test = PaddedCallee(p, cond, [slots])
    test.finish([])
    new = [None, None]
    new[1 - cond_k], new[cond_k] = padded.comp, test.comp
    inst.called_computations = new
    shape = inst.shape
    p.base = inst
    if not slots:
        return inst, _static_sizes(shape)
    inst.operands = [p.wrap(inst.operands[0], [size_at(init_sizes, s) for s in slots])]
    inst.shape = inst.operands[0].shape
    value, sizes = p.unwrap(inst, shape, len(slots))
    return value, with_sizes(_static_sizes(shape), slots, list(sizes))


@handles("conditional")
def _conditional(p: Padder, inst: HloInstruction, ops: list[HloInstruction]) -> tuple[HloInstruction, Sizes]:
    assert p.declared is not None
    branches = []
    operands = [inst.operands[0]]
    for k, comp in enumerate(inst.called_computations):
        op = ops[k + 1]
        own = dynamic_slots(p.s(op))
        branches.append(PaddedCallee(p, comp, [own]))
        p.base = inst
        operands.append(p.wrap(p.v(op), [size_at(p.s(op), s) for s in own]) if own else p.v(op))
    slots = _sorted(declared_slots(p.declared) + [s for b in branches for s in dynamic_slots(b.sizes)])
    for b in branches:
        b.finish(slots)
    inst.operands = operands
    inst.called_computations = [b.comp for b in branches]
    shape = inst.shape
    p.base = inst
    if not slots:
        return inst, _static_sizes(shape)
    inst.shape = branches[0].comp.root.shape
    value, sizes = p.unwrap(inst, shape, len(slots))
    return value, with_sizes(_static_sizes(shape), slots, list(sizes))


@handles("call", "fusion")
def _call(p: Padder, inst: HloInstruction, ops: list[HloInstruction]) -> tuple[HloInstruction, Sizes]:
    """Inlined: the callee's instructions join the caller's, its parameters stand for the operands."""
    if len(inst.called_computations) != 1:
        raise CompileError(f"a {inst.opcode} with a dynamic dimension needs exactly one computation", inst)
    callee = inst.called_computations[0]
    copy, new = clone_computation(callee, callee.name)
    params = {id(c) for c in copy.parameters}
    for c in copy.parameters:
        n = c.attributes.parameter_number
        if n >= len(ops):
            raise CompileError(f"{inst.opcode} passes {len(ops)} operands, {callee.name} has parameter {n}", inst)
        p.seed(c, p.v(ops[n]), p.s(ops[n]))
    body = [c for c in schedule(copy) if id(c) not in params]
    for c in body:
        c.name = f"{inst.name}.{c.name}"
        p.comp.add(c)
    p.run(body)
    return p.v(copy.root), p.s(copy.root)
