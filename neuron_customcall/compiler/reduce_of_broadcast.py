"""reduce(broadcast(x), init) with an idempotent reducer (maximum, minimum, and, or) over exactly
the dimensions the broadcast adds is reducer(x, init), element for element: every element of a
row of the broadcast is the same x, and op(x, x) = x for these ops (NaN included: maximum and
minimum propagate it either way). XLA's algebraic simplifier makes the same rewrite, so XLA:CPU
never reads the broadcast; computing it here cost a million-element reduction where XLA does one
maximum (XLA's algebraic_simplifier_test_4 ran 33-37x slower than XLA:CPU). Sums are left alone:
n copies of x added one by one round differently from n * x.
"""
from __future__ import annotations

from hlo.ir.convert import module_from_proto, module_to_proto
from hlo.ir.module import HloComputation, HloInstruction, HloModule
from hlo.ir.shape import Shape
from neuron_customcall.compiler.lowering.context import binary_reducer

#: reducers r with r(x, x) = x, by the element-wise opcode that applies them
IDEMPOTENT = frozenset({"maximum", "minimum", "and", "or"})


def _reducer(inst: HloInstruction) -> str:
    """The idempotent reducer's opcode when `inst` is a reduce this pass rewrites, else ""."""
    if inst.opcode != "reduce" or len(inst.operands) != 2 or len(inst.called_computations) != 1:
        return ""
    b, init = inst.operands
    if b.opcode != "broadcast" or b.shape.is_tuple or init.shape.is_tuple or inst.shape.is_tuple:
        return ""
    op = binary_reducer(inst.called_computations[0])
    if op not in IDEMPOTENT or b.shape.element_type != inst.shape.element_type:
        return ""
    kept = list(b.attributes.dimensions)
    added = set(range(b.shape.rank)) - set(kept)
    if kept != sorted(set(kept)) or set(inst.attributes.dimensions) != added:
        return ""
    return op


def simplify_reduce_of_broadcast(module: HloModule) -> HloModule:
    """`module` itself when no reduce qualifies, else a rewritten copy (the caller's module is not
    changed). The reduce and the broadcast stay in the copy unread, and are dropped as dead code."""
    if not any(_reducer(inst) for inst in module.instructions()):
        return module
    module = module_from_proto(module_to_proto(module))
    for comp in module.computations:
        for inst in list(comp.instructions):
            op = _reducer(inst)
            if op:
                _rewrite(comp, inst, op)
    return module


def _rewrite(comp: HloComputation, reduce: HloInstruction, op: str) -> None:
    b, init = reduce.operands
    x = b.operands[0]
    if x.shape.dimensions:
        fill = HloInstruction(f"{reduce.name}.init", "broadcast", Shape(init.shape.element_type, x.shape.dimensions),
                              [init])
        fill.attributes.metadata.CopyFrom(reduce.attributes.metadata)
        init = comp.add(fill)
    new = HloInstruction(f"{reduce.name}.of_broadcast", op, reduce.shape, [x, init])
    new.attributes.metadata.CopyFrom(reduce.attributes.metadata)
    comp.add(new)
    comp.replace_uses(reduce, new)
