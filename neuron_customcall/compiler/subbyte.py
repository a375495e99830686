"""Sub-byte integers (s4, u4, s2, u2): the module is rewritten to compute them in 8 bits.

XLA:CPU computes s4/u4/s2/u2 with their own width: arithmetic wraps around in 4 (or 2) bits (s4:
7 + 1 = -8), a float converted to s4 saturates to [-8, 7], a logical right shift sees the 4-bit
pattern. NumPy has no such arithmetic (ml_dtypes' int4 ufuncs cover a few operations), so before
lowering every sub-byte value becomes an 8-bit one (s4 -> s8, u4 -> u8) and is brought back into
range where an instruction may leave it: after arithmetic (add, multiply, dot, iota, an integer
convert...) a wrap (sign-extend the low bits: shift left then arithmetic shift right; unsigned:
mask). Since 2^bits divides 256, modular arithmetic in 8 bits and wrapping after gives the
narrow type's result. Instructions that observe the bit pattern get the pattern: a logical right
shift, popcnt and count-leading-zeros of a signed value read it masked, and a float-to-s4 convert
clamps to the narrow range first. The entry's parameters and results keep their types (the
program's interface): a convert widens each parameter and narrows each result.

A bitcast-convert to or from a sub-byte type reads the narrow bit patterns: the pass records the
narrow types on the instruction (frontend attribute TYPES_KEY, read back by `element_types`), and
its lowering packs or unpacks them (the emulator's bitcast-bits). A stochastic-convert to one clamps its operand to the
narrow range first, as XLA's decomposition does with the narrow type's bounds.

What has no meaning in 8 bits is refused by name: kernels (custom-calls) taking or returning a
sub-byte type, random bits of one, and tuple-typed parameters holding one.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from hlo.ir.convert import module_from_proto, module_to_proto
from hlo.ir.dtypes import numpy_dtype
from hlo.ir.literal import literal_to_numpy, numpy_to_literal
from hlo.ir.module import HloComputation, HloInstruction, HloModule
from hlo.ir.shape import Shape
from neuron_customcall.compiler.errors import CompileError

#: narrow type -> (the 8-bit type it is computed in, its bit width, signed)
SUB_BYTE: dict[str, tuple[str, int, bool]] = {
    "S4": ("S8", 4, True), "U4": ("U8", 4, False), "S2": ("S8", 2, True), "U2": ("U8", 2, False),
}

#: opcodes whose 8-bit result may lie outside the narrow type's range when the operands do not
_WRAPPED = frozenset({
    "add", "subtract", "multiply", "negate", "abs", "divide", "power", "shift-left", "not", "dot",
    "convolution", "iota", "convert", "all-reduce", "reduce-scatter",
})

#: frontend attribute of an instruction whose meaning depends on its narrow types (bitcast-convert,
#: stochastic-convert): "OPERAND_TYPE,...,RESULT_TYPE" as written, before widening
TYPES_KEY = "neuron.sub_byte_types"
#: instructions that keep their narrow types in TYPES_KEY
_RECORDED = frozenset({"bitcast-convert", "stochastic-convert"})


def element_types(inst: HloInstruction) -> tuple[list[str], str]:
    """(operand element types, result element type) of `inst` as written: the narrow types this
    pass recorded on it, or else its present ones."""
    recorded = inst.attributes.frontend_attributes.map.get(TYPES_KEY)
    if recorded:
        *operands, result = recorded.split(",")
        return operands, result
    return [o.shape.element_type for o in inst.operands], inst.shape.element_type

#: opcodes refused when a sub-byte type is among their operands or results, with the reason
_REFUSED = {
    "custom-call": "kernels take and return whole bytes",
    "rng-bit-generator": "random bits of a sub-byte type",
    "rng": "random values of a sub-byte type",
}


def _leaves(shape: Shape) -> list[Shape]:
    return [leaf for s in shape.tuple_shapes for leaf in _leaves(s)] if shape.is_tuple else [shape]


def _narrow(shape: Shape) -> bool:
    return any(s.element_type in SUB_BYTE for s in _leaves(shape))


def _widen(shape: Shape) -> Shape:
    if shape.is_tuple:
        return Shape.tuple_of([_widen(s) for s in shape.tuple_shapes])
    if shape.element_type in SUB_BYTE:
        return Shape(SUB_BYTE[shape.element_type][0], shape.dimensions, shape.layout,
                     is_dynamic_dimension=shape.is_dynamic_dimension)
    return shape


def has_sub_byte_integers(module: HloModule) -> bool:
    return any(_narrow(inst.shape) for inst in module.instructions())


class _Rewriter:
    """Adds instructions to one computation (names unique in the module)."""

    def __init__(self, comp: HloComputation, counter: list[int]) -> None:
        self.comp = comp
        self.counter = counter

    def add(self, base: HloInstruction, opcode: str, shape: Shape, operands: list[HloInstruction],
            **fields: Any) -> HloInstruction:
        self.counter[0] += 1
        inst = HloInstruction(f"{base.name}.sub_byte.{self.counter[0]}", opcode, shape, operands)
        inst.attributes.metadata.CopyFrom(base.attributes.metadata)
        for key, value in fields.items():
            if key == "literal":
                inst.attributes.literal.CopyFrom(value)
            elif key == "dimensions":
                inst.attributes.dimensions.extend(value)
        return self.comp.add(inst)

    def scalar(self, base: HloInstruction, value: Any, element_type: str, dims: tuple[int, ...]) -> HloInstruction:
        """A constant of `value`, broadcast to `dims` (a scalar stays a scalar: lifted reducers)."""
        dtype = numpy_dtype(element_type)
        c = self.add(base, "constant", Shape(element_type), [],
                     literal=numpy_to_literal(np.asarray(value, dtype), Shape(element_type)))
        if not dims:
            return c
        return self.add(base, "broadcast", Shape(element_type, dims), [c], dimensions=[])

    def wrap(self, x: HloInstruction, narrow: str) -> HloInstruction:
        """x (8-bit) brought into the narrow type's range (two's complement of its low bits)."""
        wide, bits, signed = SUB_BYTE[narrow]
        dims = x.shape.dimensions
        if not signed:
            return self.add(x, "and", x.shape, [x, self.scalar(x, (1 << bits) - 1, wide, dims)])
        k = self.scalar(x, 8 - bits, wide, dims)
        up = self.add(x, "shift-left", x.shape, [x, k])
        return self.add(x, "shift-right-arithmetic", x.shape, [up, k])

    def pattern(self, x: HloInstruction, narrow: str) -> HloInstruction:
        """The narrow bit pattern of an in-range 8-bit value (unsigned: itself)."""
        wide, bits, signed = SUB_BYTE[narrow]
        if not signed:
            return x
        return self.add(x, "and", x.shape, [x, self.scalar(x, (1 << bits) - 1, wide, x.shape.dimensions)])


def _replace_uses(comp: HloComputation, old: HloInstruction, new: HloInstruction, skip: set[int]) -> None:
    for inst in comp.instructions:
        if id(inst) in skip:
            continue
        inst.operands = [new if o is old else o for o in inst.operands]
    if comp.root is old:
        comp.root = new


def _narrow_operand_type(inst: HloInstruction) -> str | None:
    return next((o.shape.element_type for o in inst.operands if o.shape.element_type in SUB_BYTE), None)


def _rewrite_instruction(rw: _Rewriter, inst: HloInstruction, narrow_in: str | None) -> HloInstruction | None:
    """Rewrites `inst` (already widened) in place where its meaning needs it; returns the
    instruction its users should read instead (a wrap), or None."""
    narrow_out = inst.shape.element_type if inst.shape.element_type in SUB_BYTE else None
    op = inst.opcode
    if op == "constant" and narrow_out:
        value = literal_to_numpy(inst.attributes.literal, inst.name).astype(np.int64)
        wide = _widen(inst.shape)
        inst.attributes.literal.CopyFrom(numpy_to_literal(value.astype(numpy_dtype(wide.element_type)),
                                                          wide))
    if op in _RECORDED and (narrow_in or narrow_out):
        # operands are widened already; the one narrow operand of these opcodes is the last one
        types = [o.shape.element_type for o in inst.operands[:-1]] + [narrow_in or inst.operands[-1].shape.element_type]
        inst.attributes.frontend_attributes.map[TYPES_KEY] = ",".join([*types, inst.shape.element_type])
    if op == "bitcast-convert":
        inst.shape = _widen(inst.shape)
        return None  # no wrap: its lowering unpacks to the narrow values
    if op == "convert" and narrow_out and narrow_in is None:
        x = inst.operands[0]
        kind = np.dtype(numpy_dtype(x.shape.element_type)).kind
        if kind in "fcV":  # a float saturates to the narrow range (and NaN gives 0, as before)
            _, bits, signed = SUB_BYTE[narrow_out]
            lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
            dims, et = x.shape.dimensions, x.shape.element_type
            real = x if kind != "c" else rw.add(x, "real", Shape(_real_of(et), dims), [x])
            et = real.shape.element_type
            clamped = rw.add(x, "clamp", real.shape, [rw.scalar(x, lo, et, dims), real, rw.scalar(x, hi, et, dims)])
            inst.operands = [clamped]
    if narrow_in and op == "shift-right-logical":
        inst.operands = [rw.pattern(inst.operands[0], narrow_in), inst.operands[1]]
    if narrow_in and op == "popcnt":
        inst.operands = [rw.pattern(inst.operands[0], narrow_in)]
    if narrow_in and op == "count-leading-zeros":
        wide, bits, _ = SUB_BYTE[narrow_in]
        inst.operands = [rw.pattern(inst.operands[0], narrow_in)]
        inst.shape = _widen(inst.shape)
        return rw.add(inst, "subtract", inst.shape, [inst, rw.scalar(inst, 8 - bits, wide, inst.shape.dimensions)])
    inst.shape = _widen(inst.shape)
    if narrow_out and op in _WRAPPED:
        return rw.wrap(inst, narrow_out)
    return None


def _real_of(element_type: str) -> str:
    return {"C64": "F32", "C128": "F64"}[element_type]


def _narrowed_operand_types(module: HloModule) -> dict[int, str | None]:
    """Per instruction (by id()), the first sub-byte element type among its operands, read
    before anything is widened."""
    return {id(inst): _narrow_operand_type(inst) for inst in module.instructions()}


def _check(inst: HloInstruction) -> None:
    if inst.opcode == "bitcast" and inst.shape.element_type != inst.operands[0].shape.element_type and \
            (_narrow(inst.shape) or _narrow(inst.operands[0].shape)):
        raise CompileError("bitcast that changes the element type to or from a type narrower than a byte is not "
                           "supported (bitcast-convert is)", inst)
    reason = _REFUSED.get(inst.opcode)
    if reason and (_narrow(inst.shape) or any(_narrow(o.shape) for o in inst.operands)):
        raise CompileError(f"{inst.opcode} of a sub-byte integer type (s4, u4, s2, u2) is not supported: {reason}",
                           inst)


def widen_sub_byte_integers(module: HloModule) -> HloModule:
    """`module` itself when it holds no sub-byte integer, else a rewritten copy (the caller's
    module is not changed)."""
    if not has_sub_byte_integers(module):
        return module
    module = module_from_proto(module_to_proto(module))
    for inst in module.instructions():
        _check(inst)
    narrow_in = _narrowed_operand_types(module)
    counter = [0]
    for comp in module.computations:
        rw = _Rewriter(comp, counter)
        entry = comp is module.entry
        result_shape = comp.root.shape if comp.root is not None else None
        for inst in list(comp.instructions):
            if inst.opcode == "parameter" and entry and _narrow(inst.shape):
                if inst.shape.is_tuple:
                    raise CompileError("a tuple-typed entry parameter holding a sub-byte integer type is not "
                                       "supported; pass its elements as separate parameters", inst)
                widened = rw.add(inst, "convert", _widen(inst.shape), [inst])
                _replace_uses(comp, inst, widened, {id(widened)})
                continue
            replacement = _rewrite_instruction(rw, inst, narrow_in.get(id(inst)))
            if replacement is not None:
                _replace_uses(comp, inst, replacement, _added_since(comp, replacement))
        if entry and result_shape is not None and _narrow(result_shape):
            comp.root = _narrowed_result(rw, comp.root, result_shape)
    return module


def _added_since(comp: HloComputation, wrap: HloInstruction) -> set[int]:
    """The instructions of a wrap chain (they read the original instruction)."""
    chain: set[int] = set()
    todo = [wrap]
    while todo:
        x = todo.pop()
        if id(x) in chain or ".sub_byte." not in x.name:
            continue
        chain.add(id(x))
        todo.extend(x.operands)
    return chain


def _narrowed_result(rw: _Rewriter, root: HloInstruction, shape: Shape) -> HloInstruction:
    """The entry's result in its declared (sub-byte) types."""
    if not shape.is_tuple:
        return rw.add(root, "convert", shape, [root]) if shape.element_type in SUB_BYTE else root
    if root.opcode != "tuple":
        raise CompileError("a tuple result holding a sub-byte integer type must be built by a tuple instruction",
                           root)
    parts = [_narrowed_result(rw, o, s) for o, s in zip(root.operands, shape.tuple_shapes)]
    return rw.add(root, "tuple", Shape.tuple_of([p.shape for p in parts]), parts)

