"""`get-dimension-size` of a static dimension is a constant: the dimension's size, as XLA's
dynamic padder makes it. Folded before lowering so that the operand is no longer read when
nothing else reads it: an elided constant (`constant({...})`, whose values HLO text dropped and
whose compilation is refused) then costs nothing when only its shape is asked for, which is the
one case where an elided constant's values are not needed besides dead code.

Dynamic dimensions are left to the dynamic padder (compiler/dynamic_padder.py), which runs after.
"""
from __future__ import annotations

import numpy as np

from hlo.ir.convert import module_from_proto, module_to_proto
from hlo.ir.literal import numpy_to_literal
from hlo.ir.module import HloInstruction, HloModule


def _static_size(inst: HloInstruction) -> int | None:
    """The size asked for when `inst` is a get-dimension-size of a static dimension, else None."""
    if inst.opcode != "get-dimension-size" or len(inst.operands) != 1 or len(inst.attributes.dimensions) != 1:
        return None
    shape, d = inst.operands[0].shape, int(inst.attributes.dimensions[0])
    if shape.is_tuple or not 0 <= d < shape.rank or inst.shape.element_type != "S32":
        return None
    if d < len(shape.is_dynamic_dimension) and shape.is_dynamic_dimension[d]:
        return None
    return int(shape.dimensions[d])


def fold_static_dimension_sizes(module: HloModule) -> HloModule:
    """`module` itself when no get-dimension-size asks for a static dimension, else a rewritten
    copy (the caller's module is not changed)."""
    if all(_static_size(inst) is None for inst in module.instructions()):
        return module
    module = module_from_proto(module_to_proto(module))
    for comp in module.computations:
        for inst in list(comp.instructions):
            size = _static_size(inst)
            if size is None:
                continue
            const = HloInstruction(f"{inst.name}.static", "constant", inst.shape, [])
            const.attributes.literal.CopyFrom(numpy_to_literal(np.array(size, np.int32), inst.shape))
            const.attributes.metadata.CopyFrom(inst.attributes.metadata)
            comp.add(const)
            comp.replace_uses(inst, const)
    return module
