"""Bounded dynamic shapes (`f32[<=8,3]`): the module is rewritten to static shapes before lowering.

XLA's semantics (operation_semantics.md, its dynamic padder and dynamic dimension inference): a
dynamic dimension has a bound, the static size of its buffer, and a size known only at run time,
set by `set-dimension-size` (or `dynamic-reshape`) and read by `get-dimension-size`. Elements past
the size are padding whose values are unspecified; each op behaves as if the array had its
dynamic size. As XLA's dynamic padder does, every dynamic array here becomes a padded static
buffer of its bound plus one s32 size value per dynamic dimension, and an op that would see the
padding is rewritten so that it does not:

- element-wise ops, broadcast, transpose, convert and copies carry the sizes (the padding is
  computed on and never read); where two operands' sizes differ, XLA's implicit broadcast (a
  size-1 operand repeated) and its size rule (the larger when the smaller is 1, else the smaller);
- `reduce` over a dynamic dimension masks the padding with the reduce's init value, `dot` masks
  the contracting dimensions of both operands with zero (an identity each, as XLA pads);
- `slice`, `pad` and `concatenate` compute the new size (XLA's arithmetic; a slice's is clamped to
  [0, bound], where XLA:CPU would address memory past the buffer); a
  concatenate along a dynamic dimension packs its operands one after the other, a pad masks the
  operand's padding with the pad value, a `reverse` of a dynamic dimension reverses the valid part;
- `reshape` (also with `inferred_dimension`) and `dynamic-reshape` move elements by their logical
  (row-major over the dynamic sizes) position: a gather of computed indices, or a plain reshape
  when only the outermost dimension is dynamic on both sides (the valid elements are then a prefix).
  As on XLA:CPU, a dynamic-reshape whose bounds are the operand's dimensions moves no element: it
  sets the size of each dimension;
- `get-dimension-size` becomes the size value (or the bound of a static dimension).

- while, conditional and call (dynamic_calls.py) carry the sizes into and out of their
  computations; sort, gather, scatter, reduce-window, dynamic-slice and dynamic-update-slice
  (dynamic_indexing.py) follow XLA's rules for each.

The entry's results keep XLA:CPU's convention for a dynamic array: the valid elements compacted in
row-major order at the start of a buffer of the bound's shape (the rest unspecified). Anything else
that meets a dynamic dimension (convolution, select-and-scatter, scan, dynamic entry parameters,
dynamic shapes inside computations applied element-wise) is refused with a CompileError naming
the opcode: reading the padding there would give a plausible-looking wrong answer.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Union

import numpy as np

from hlo.ir.convert import module_from_proto, module_to_proto
from hlo.ir.dtypes import numpy_dtype
from hlo.ir.literal import numpy_to_literal
from hlo.ir.module import HloComputation, HloInstruction, HloModule
from hlo.ir.shape import Shape
from hlo.opcodes import ELEMENTWISE, OPCODES
from neuron_customcall.compiler.errors import CompileError
from neuron_customcall.compiler.schedule import schedule

#: A dimension's size: an int when static (or known at compile time), else an s32[] instruction.
Size = Union[int, HloInstruction]
#: Sizes of an array (one per dimension) or, for a tuple, of each element.
Sizes = Union[tuple[Size, ...], tuple["Sizes", ...]]

__all__ = ["REWRITTEN_OPCODES", "has_dynamic_shapes", "pad_dynamic_shapes"]


def _is_dynamic(shape: Shape) -> bool:
    return any(any(leaf.is_dynamic_dimension) for leaf in shape.leaves())


def _static(shape: Shape) -> Shape:
    """The padded buffer's shape: the bounds, no dimension dynamic."""
    if shape.is_tuple:
        return Shape.tuple_of([_static(s) for s in shape.tuple_shapes])
    if not any(shape.is_dynamic_dimension):
        return shape
    return Shape(shape.element_type, shape.dimensions, shape.layout, (), (False,) * len(shape.dimensions))


def has_dynamic_shapes(module: HloModule) -> bool:
    """Whether the pass has work: a dynamic shape, or an opcode only it removes (a set-dimension-size
    may declare a static result)."""
    return any(_is_dynamic(inst.shape) or inst.opcode in REWRITTEN_OPCODES for inst in module.instructions())


def _static_sizes(shape: Shape) -> Sizes:
    if shape.is_tuple:
        return tuple(_static_sizes(s) for s in shape.tuple_shapes)
    return tuple(shape.dimensions)


def _dynamic_sizes(sizes: Sizes) -> bool:
    return any(_dynamic_sizes(s) if isinstance(s, tuple) else isinstance(s, HloInstruction) for s in sizes)


def _truncating_divide(a: int, b: int) -> int:
    """XLA's s32 division: rounds toward zero; by zero gives -1."""
    if b == 0:
        return -1
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


class Padder:
    """Rewrites one computation; `value` and `sizes` are keyed by the original instruction. A called
    computation is rewritten as a copy of its own (dynamic_calls.py), with its parameters' sizes."""

    def __init__(self, comp: HloComputation, module: HloModule) -> None:
        self.comp = comp
        self.module = module
        self.count = 0
        self.value: dict[int, HloInstruction] = {}
        self.sizes: dict[int, Sizes] = {}
        self.base: HloInstruction | None = None
        #: the result shape of the instruction being rewritten, as declared (dynamic)
        self.declared: Shape | None = None

    # -- building instructions -----------------------------------------------------------------
    def add(self, opcode: str, shape: Shape, operands: list[HloInstruction], **fields: Any) -> HloInstruction:
        assert self.base is not None
        self.count += 1
        inst = HloInstruction(f"{self.base.name}.dyn.{self.count}", opcode, shape, operands)
        inst.attributes.metadata.CopyFrom(self.base.attributes.metadata)
        a = inst.attributes
        for key, value in fields.items():
            if key == "literal":
                a.literal.CopyFrom(value)
            elif key in ("dimensions", "dynamic_slice_sizes", "gather_slice_sizes"):
                getattr(a, key).extend(value)
            elif key == "tuple_index":
                a.tuple_index = value
            elif key == "direction":
                a.comparison_direction = value
            elif key == "slice":
                for start, limit, stride in value:
                    d = a.slice_dimensions.add()
                    d.start, d.limit, d.stride = start, limit, stride
            elif key == "padding":
                for lo, hi, interior in value:
                    d = a.padding_config.dimensions.add()
                    d.edge_padding_low, d.edge_padding_high, d.interior_padding = lo, hi, interior
            elif key == "gather":
                g = a.gather_dimension_numbers
                g.collapsed_slice_dims.append(0)
                g.start_index_map.append(0)
                g.index_vector_dim = value
            else:
                raise AssertionError(key)
        return self.comp.add(inst)

    def const(self, value: Any, element_type: str = "S32") -> HloInstruction:
        shape = Shape.array(element_type, ())
        return self.add("constant", shape, [], literal=numpy_to_literal(np.asarray(value, numpy_dtype(element_type)),
                                                                        shape))

    def scalar(self, size: Size) -> HloInstruction:
        return size if isinstance(size, HloInstruction) else self.const(size)

    def bcast(self, scalar: HloInstruction, dims: tuple[int, ...]) -> HloInstruction:
        return self.add("broadcast", Shape.array(scalar.shape.element_type, dims), [scalar], dimensions=[])

    def arith(self, op: str, a: Size, b: Size) -> Size:
        """s32 scalar arithmetic, folded when both sides are known (division as XLA's s32 divide of
        non-negative values)."""
        if isinstance(a, int) and isinstance(b, int):
            return {"add": a + b, "subtract": a - b, "multiply": a * b,
                    "divide": _truncating_divide(a, b), "maximum": max(a, b), "minimum": min(a, b)}[op]
        if op == "multiply" and (a == 1 or b == 1):
            return b if a == 1 else a
        if op in ("add", "subtract") and b == 0:
            return a
        return self.add(op, Shape.array("S32", ()), [self.scalar(a), self.scalar(b)])

    def pred(self, opcode: str, a: HloInstruction, b: HloInstruction, direction: str = "") -> HloInstruction:
        scalar = Shape.array("PRED", ())
        if opcode == "compare":
            return self.add("compare", scalar, [a, b], direction=direction)
        return self.add(opcode, scalar, [a, b])

    def broadcasts(self, own: Size, other: Size) -> HloInstruction:
        """Whether an operand of size `own` is implicitly broadcast against one of size `other`."""
        own_i, other_i = self.scalar(own), self.scalar(other)
        return self.pred("and", self.pred("compare", own_i, self.const(1), "EQ"),
                         self.pred("compare", own_i, other_i, "LT"))

    def merged_size(self, a: Size, b: Size) -> Size:
        """The size of an element-wise result over operand sizes a and b (XLA's dynamic dimension
        inference): the larger when the smaller is 1, else the smaller."""
        if a is b:
            return a
        need = self.pred("or", self.broadcasts(a, b), self.broadcasts(b, a))
        larger, smaller = self.arith("maximum", a, b), self.arith("minimum", a, b)
        return self.add("select", Shape.array("S32", ()), [need, self.scalar(larger), self.scalar(smaller)])

    def implicit_broadcast(self, x: HloInstruction, d: int, own: Size, other: Size) -> HloInstruction:
        """x, or, when its size `own` along d is 1 and `other` is larger, its first slice along d
        repeated over the whole dimension (XLA's dynamic padder, for element-wise binary ops)."""
        dims = x.shape.dimensions
        et = x.shape.element_type
        one = tuple(1 if k == d else b for k, b in enumerate(dims))
        first = self.add("slice", Shape.array(et, one), [x], slice=[(0, b, 1) for b in one])
        flat = self.add("reshape", Shape.array(et, tuple(b for k, b in enumerate(dims) if k != d)), [first])
        spread = self.add("broadcast", Shape.array(et, dims), [flat], dimensions=[k for k in range(len(dims)) if k != d])
        need = self.bcast(self.broadcasts(own, other), dims)
        return self.add("select", Shape.array(et, dims), [need, spread, x])

    def mask(self, x: HloInstruction, sizes: tuple[Size, ...], dims: list[int], fill: HloInstruction) -> HloInstruction:
        """x with the elements past the dynamic size of each of `dims` replaced by the scalar `fill`."""
        bounds = x.shape.dimensions
        keep = None
        for d in dims:
            if not isinstance(sizes[d], HloInstruction):
                continue
            iota = self.add("iota", Shape.array("S32", bounds), [], dimensions=[d])
            inside = self.add("compare", Shape.array("PRED", bounds), [iota, self.bcast(sizes[d], bounds)],
                              direction="LT")
            keep = inside if keep is None else self.add("and", inside.shape, [keep, inside])
        if keep is None:
            return x
        return self.add("select", x.shape, [keep, x, self.bcast(fill, bounds)])

    def relayout(self, x: HloInstruction, in_sizes: tuple[Size, ...], bounds: tuple[int, ...],
                 sizes: tuple[Size, ...]) -> HloInstruction:
        """An array of `bounds` whose element at logical position L (row-major over `sizes`) is x's
        element at logical position L (row-major over `in_sizes`): reshape with dynamic sizes."""
        in_bounds = x.shape.dimensions
        et = x.shape.element_type
        if all(s == b for s, b in zip(in_sizes[1:], in_bounds[1:])) and \
                all(s == b for s, b in zip(sizes[1:], bounds[1:])):
            # the valid elements are a prefix of both buffers
            return self.add("reshape", Shape.array(et, bounds), [x]) if bounds != in_bounds else x
        linear: HloInstruction | None = None
        stride: Size = 1
        for j in range(len(bounds) - 1, -1, -1):
            term = self.add("iota", Shape.array("S32", bounds), [], dimensions=[j])
            if stride != 1:
                term = self.add("multiply", term.shape, [term, self.bcast(self.scalar(stride), bounds)])
            linear = term if linear is None else self.add("add", term.shape, [linear, term])
            stride = self.arith("multiply", stride, sizes[j])
        if linear is None:  # a scalar result
            linear = self.const(0)
        index: HloInstruction | None = None
        stride, phys = 1, 1
        for i in range(len(in_bounds) - 1, -1, -1):
            coord = linear
            if stride != 1:
                safe = self.arith("maximum", stride, 1)  # a zero size: no valid element, no division by 0
                coord = self.add("divide", coord.shape, [coord, self.bcast(self.scalar(safe), bounds)])
            if i > 0:
                safe = self.arith("maximum", in_sizes[i], 1)
                coord = self.add("remainder", coord.shape, [coord, self.bcast(self.scalar(safe), bounds)])
            if phys != 1:
                coord = self.add("multiply", coord.shape, [coord, self.bcast(self.const(phys), bounds)])
            index = coord if index is None else self.add("add", coord.shape, [index, coord])
            stride = self.arith("multiply", stride, in_sizes[i])
            phys *= in_bounds[i]
        if index is None:
            index = linear
        flat = self.add("reshape", Shape.array(et, (math.prod(in_bounds),)), [x])
        idx = self.add("reshape", Shape.array("S32", bounds + (1,)), [index])
        return self.add("gather", Shape.array(et, bounds), [flat, idx], gather_slice_sizes=[1], gather=len(bounds))

    # -- the walk ------------------------------------------------------------------------------
    def v(self, inst: HloInstruction) -> HloInstruction:
        return self.value[id(inst)]

    def s(self, inst: HloInstruction) -> Sizes:
        return self.sizes[id(inst)]

    def seed(self, inst: HloInstruction, value: HloInstruction, sizes: Sizes) -> None:
        """`inst` (a parameter of a called computation) stands for `value` with `sizes`."""
        self.value[id(inst)] = value
        self.sizes[id(inst)] = sizes

    def wrap(self, value: HloInstruction, sizes: list[Size]) -> HloInstruction:
        """A flat tuple of value (its elements, if a tuple) followed by the s32 sizes: how a size
        crosses into or out of a called computation (XLA appends them to a while's tuple too)."""
        parts = [self.add("get-tuple-element", s, [value], tuple_index=k) for k, s in enumerate(value.shape.tuple_shapes)] \
            if value.shape.is_tuple else [value]
        parts += [self.scalar(s) for s in sizes]
        return self.add("tuple", Shape.tuple_of([x.shape for x in parts]), parts)

    def unwrap(self, wrapped: HloInstruction, shape: Shape, count: int) -> tuple[HloInstruction, list[HloInstruction]]:
        """The value of `shape` and the `count` sizes that wrap() packed into `wrapped`."""
        n = len(shape.tuple_shapes) if shape.is_tuple else 1
        parts = [self.add("get-tuple-element", wrapped.shape.tuple_shapes[k], [wrapped], tuple_index=k)
                 for k in range(n + count)]
        value = self.add("tuple", shape, parts[:n]) if shape.is_tuple else parts[0]
        return value, parts[n:]

    def run(self, order: list[HloInstruction]) -> None:
        for inst in order:
            if id(inst) in self.value:  # a parameter seeded by the caller
                continue
            self.base = inst
            handler = _HANDLERS.get(inst.opcode)
            touched = inst.opcode in _ALWAYS or _is_dynamic(inst.shape) or \
                any(_dynamic_sizes(self.s(o)) for o in inst.operands) or \
                any(calls_dynamic(c) for c in inst.called_computations)
            if inst.opcode == "parameter":
                if _is_dynamic(inst.shape):
                    raise CompileError(f"an entry parameter with a dynamic dimension ({inst.shape}) is not supported: "
                                       "the calling convention carries no dimension size; pass the padded "
                                       "buffer and set its size with set-dimension-size", inst)
                handler = None
            elif touched and handler is None:
                raise CompileError(f"{inst.opcode} of an array with a dynamic dimension is not supported "
                                   f"({inst.shape}; the dynamic padder handles {', '.join(_SUPPORTED)})", inst)
            if not touched or handler is None:
                inst.operands = [self.v(o) for o in inst.operands]
                self.value[id(inst)] = inst
                self.sizes[id(inst)] = _static_sizes(inst.shape)
                continue
            operands = list(inst.operands)
            inst.operands = [self.v(o) for o in operands]
            self.declared = inst.shape
            inst.shape = _static(inst.shape)
            value, sizes = handler(self, inst, operands)
            self.value[id(inst)] = value
            self.sizes[id(inst)] = sizes


Handler = Callable[[Padder, HloInstruction, list[HloInstruction]], tuple[HloInstruction, Sizes]]
_HANDLERS: dict[str, Handler] = {}


def handles(*opcodes: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for op in opcodes:
            _HANDLERS[op] = fn
        return fn
    return register


def _set_size(d: int, sizes: tuple[Size, ...], size: Size) -> tuple[Size, ...]:
    return sizes[:d] + (size,) + sizes[d + 1:]


@handles("set-dimension-size")
def _set_dimension_size(p: Padder, inst: HloInstruction, ops: list[HloInstruction]) -> tuple[HloInstruction, Sizes]:
    d = inst.attributes.dimensions[0]
    assert p.declared is not None
    if not p.declared.is_dynamic_dimension[d]:
        # declared static, the dimension keeps its static size (XLA:CPU: get-dimension-size gives it)
        return p.v(ops[0]), p.s(ops[0])
    return p.v(ops[0]), _set_size(d, p.s(ops[0]), p.v(ops[1]))


@handles("get-dimension-size")
def _get_dimension_size(p: Padder, inst: HloInstruction, ops: list[HloInstruction]) -> tuple[HloInstruction, Sizes]:
    return p.scalar(p.s(ops[0])[inst.attributes.dimensions[0]]), ()


_CARRY = tuple(op for op, r in OPCODES.items() if r.cls == ELEMENTWISE) + ("bitcast-convert",)


@handles(*_CARRY)
def _elementwise(p: Padder, inst: HloInstruction, ops: list[HloInstruction]) -> tuple[HloInstruction, Sizes]:
    """XLA's rule (dynamic dimension inference): operands' dynamic sizes of one dimension merge
    pairwise into the larger where the smaller is 1 (an implicit broadcast), else the smaller; a
    binary op broadcasts an operand whose size is 1 where the other's is larger (dynamic padder)."""
    if inst.opcode == "bitcast-convert" and inst.shape.rank != ops[0].shape.rank:
        raise CompileError("bitcast-convert between element widths of an array with a dynamic dimension is not "
                           "supported", inst)
    rank = inst.shape.rank
    sizes: list[Size] = list(inst.shape.dimensions)
    merged: list[bool] = [False] * rank
    for o in ops:
        if o.shape.rank != rank:
            continue
        for d, s in enumerate(p.s(o)):
            if isinstance(s, HloInstruction):
                sizes[d] = p.merged_size(sizes[d], s) if merged[d] else s
                merged[d] = True
    if len(ops) == 2 and ops[0].shape.rank == ops[1].shape.rank == rank and inst.opcode in _ELEMENTWISE_BINARY:
        s0, s1 = p.s(ops[0]), p.s(ops[1])
        for d in range(rank):
            if isinstance(s0[d], HloInstruction) and isinstance(s1[d], HloInstruction) and s0[d] is not s1[d]:
                inst.operands = [p.implicit_broadcast(inst.operands[0], d, s0[d], s1[d]),
                                 p.implicit_broadcast(inst.operands[1], d, s1[d], s0[d])]
    return inst, tuple(sizes)


_ELEMENTWISE_BINARY = frozenset(op for op, r in OPCODES.items() if r.cls == ELEMENTWISE and r.arity == 2)


@handles("broadcast")
def _broadcast(p: Padder, inst: HloInstruction, ops: list[HloInstruction]) -> tuple[HloInstruction, Sizes]:
    sizes = list(inst.shape.dimensions)
    for k, d in enumerate(inst.attributes.dimensions):
        sizes[d] = p.s(ops[0])[k]
    return inst, tuple(sizes)


@handles("transpose")
def _transpose(p: Padder, inst: HloInstruction, ops: list[HloInstruction]) -> tuple[HloInstruction, Sizes]:
    return inst, tuple(p.s(ops[0])[d] for d in inst.attributes.dimensions)


@handles("tuple")
def _tuple(p: Padder, inst: HloInstruction, ops: list[HloInstruction]) -> tuple[HloInstruction, Sizes]:
    return inst, tuple(p.s(o) for o in ops)


@handles("get-tuple-element")
def _get_tuple_element(p: Padder, inst: HloInstruction, ops: list[HloInstruction]) -> tuple[HloInstruction, Sizes]:
    return inst, p.s(ops[0])[inst.attributes.tuple_index]


@handles("reduce")
def _reduce(p: Padder, inst: HloInstruction, ops: list[HloInstruction]) -> tuple[HloInstruction, Sizes]:
    n = len(ops) // 2
    dims = list(inst.attributes.dimensions)
    inst.operands = [p.mask(p.v(x), p.s(x), dims, p.v(init)) for x, init in zip(ops[:n], ops[n:])] + \
        [p.v(init) for init in ops[n:]]
    kept = tuple(s for d, s in enumerate(p.s(ops[0])) if d not in dims)
    return inst, (kept if not inst.shape.is_tuple else tuple(kept for _ in range(n)))


@handles("dot")
def _dot(p: Padder, inst: HloInstruction, ops: list[HloInstruction]) -> tuple[HloInstruction, Sizes]:
    dn = inst.attributes.dot_dimension_numbers
    lhs, rhs = p.s(ops[0]), p.s(ops[1])
    masked = []
    for x, contracting in ((ops[0], dn.lhs_contracting_dimensions), (ops[1], dn.rhs_contracting_dimensions)):
        # both sides: the padding of either may hold a NaN or infinity, and 0 * inf is NaN
        sizes = p.s(x)
        for dl, dr in zip(dn.lhs_contracting_dimensions, dn.rhs_contracting_dimensions):
            other = rhs[dr] if x is ops[0] else lhs[dl]
            d = dl if x is ops[0] else dr
            if not isinstance(sizes[d], HloInstruction) and isinstance(other, HloInstruction):
                sizes = _set_size(d, sizes, other)
        masked.append(p.mask(p.v(x), sizes, list(contracting), p.const(0, x.shape.element_type)))
    inst.operands = masked

    def first(a: Size, b: Size) -> Size:
        return a if isinstance(a, HloInstruction) else b

    batch = [first(lhs[a], rhs[b]) for a, b in zip(dn.lhs_batch_dimensions, dn.rhs_batch_dimensions)]
    free_l = [s for d, s in enumerate(lhs) if d not in dn.lhs_batch_dimensions and d not in dn.lhs_contracting_dimensions]
    free_r = [s for d, s in enumerate(rhs) if d not in dn.rhs_batch_dimensions and d not in dn.rhs_contracting_dimensions]
    return inst, tuple(batch + free_l + free_r)


@handles("slice")
def _slice(p: Padder, inst: HloInstruction, ops: list[HloInstruction]) -> tuple[HloInstruction, Sizes]:
    sizes: list[Size] = list(inst.shape.dimensions)
    for d, (s, sd) in enumerate(zip(p.s(ops[0]), inst.attributes.slice_dimensions)):
        stride = sd.stride or 1
        if isinstance(s, HloInstruction) and inst.shape.dimensions[d] != 1:
            # XLA: (size - start + stride - 1) / stride; XLA does not clamp it, and XLA:CPU reads
            # and writes past the buffer when it leaves [0, bound]: clamped here
            s = p.arith("subtract", s, sd.start)
            s = p.arith("divide", p.arith("add", s, stride - 1), stride)
            sizes[d] = p.arith("minimum", p.arith("maximum", s, 0), inst.shape.dimensions[d])
    return inst, tuple(sizes)


@handles("pad")
def _pad(p: Padder, inst: HloInstruction, ops: list[HloInstruction]) -> tuple[HloInstruction, Sizes]:
    in_sizes = p.s(ops[0])
    config = inst.attributes.padding_config.dimensions
    sizes: list[Size] = list(inst.shape.dimensions)
    dynamic = [d for d, s in enumerate(in_sizes) if isinstance(s, HloInstruction)]
    for d in dynamic:
        c = config[d]
        if c.edge_padding_low < 0 or c.edge_padding_high < 0:
            raise CompileError("pad with negative padding of a dynamic dimension is not supported", inst)
        s = in_sizes[d]
        grown = p.arith("multiply", p.arith("maximum", p.arith("subtract", s, 1), 0), c.interior_padding)
        sizes[d] = p.arith("add", p.arith("add", s, grown), c.edge_padding_low + c.edge_padding_high)
    inst.operands = [p.mask(p.v(ops[0]), in_sizes, dynamic, p.v(ops[1])), p.v(ops[1])]
    return inst, tuple(sizes)


@handles("concatenate")
def _concatenate(p: Padder, inst: HloInstruction, ops: list[HloInstruction]) -> tuple[HloInstruction, Sizes]:
    d = inst.attributes.dimensions[0]
    merged = _elementwise(p, inst, ops)[1]
    if not any(isinstance(p.s(o)[d], HloInstruction) for o in ops):
        return inst, merged
    # along a dynamic dimension: each operand's valid part right after the previous one's
    zero = p.const(0, inst.shape.element_type)
    out = p.bcast(zero, inst.shape.dimensions)
    offset: Size = 0
    for o in ops:
        starts = [p.const(0) if k != d else p.scalar(offset) for k in range(inst.shape.rank)]
        out = p.add("dynamic-update-slice", out.shape, [out, p.v(o)] + starts)
        offset = p.arith("add", offset, p.s(o)[d])
    return out, _set_size(d, merged, offset)


@handles("reverse")
def _reverse(p: Padder, inst: HloInstruction, ops: list[HloInstruction]) -> tuple[HloInstruction, Sizes]:
    sizes = p.s(ops[0])
    out = inst
    for d in inst.attributes.dimensions:
        if not isinstance(sizes[d], HloInstruction):
            continue
        # reversed, the valid part ends the buffer; shift it to the start
        bound = inst.shape.dimensions[d]
        config = [(0, bound if k == d else 0, 0) for k in range(inst.shape.rank)]
        grown = tuple(b * 2 if k == d else b for k, b in enumerate(inst.shape.dimensions))
        padded = p.add("pad", Shape.array(inst.shape.element_type, grown),
                       [out, p.const(0, inst.shape.element_type)], padding=config)
        starts = [p.const(0) if k != d else p.scalar(p.arith("subtract", bound, sizes[d]))
                  for k in range(inst.shape.rank)]
        out = p.add("dynamic-slice", inst.shape, [padded] + starts, dynamic_slice_sizes=inst.shape.dimensions)
    return out, sizes


def _reshaped(p: Padder, inst: HloInstruction, x: HloInstruction, sizes: tuple[Size, ...]) -> tuple[HloInstruction, Sizes]:
    return p.relayout(p.v(x), p.s(x), inst.shape.dimensions, sizes), sizes


@handles("reshape")
def _reshape(p: Padder, inst: HloInstruction, ops: list[HloInstruction]) -> tuple[HloInstruction, Sizes]:
    declared = p.declared
    assert declared is not None
    dims = inst.shape.dimensions
    in_sizes = p.s(ops[0])
    if inst.attributes.dimensions:
        dynamic = [inst.attributes.dimensions[0]]
    else:
        dynamic = [d for d, flag in enumerate(declared.is_dynamic_dimension) if flag]
    if not _dynamic_sizes(in_sizes):
        return inst, tuple(dims)
    if len(dynamic) != 1:
        raise CompileError(f"reshape of an array with a dynamic dimension to {declared} is not supported: the "
                           "result must have exactly one dynamic dimension (or use inferred_dimension or "
                           "dynamic-reshape)", inst)
    k = dynamic[0]
    total: Size = 1
    for s in in_sizes:
        total = p.arith("multiply", total, s)
    rest = math.prod(b for d, b in enumerate(dims) if d != k)
    return _reshaped(p, inst, ops[0], _set_size(k, tuple(dims), p.arith("divide", total, rest)))


@handles("dynamic-reshape")
def _dynamic_reshape(p: Padder, inst: HloInstruction, ops: list[HloInstruction]) -> tuple[HloInstruction, Sizes]:
    assert p.declared is not None
    sizes = tuple(p.v(ops[1 + d]) if flag else b
                  for d, (b, flag) in enumerate(zip(inst.shape.dimensions, p.declared.is_dynamic_dimension)))
    if inst.shape.dimensions == ops[0].shape.dimensions:
        # XLA:CPU: bounds equal to the operand's are a set-dimension-size of each dimension (no element
        # moves), not a row-major reshape of the operand's valid elements
        return p.v(ops[0]), sizes
    return _reshaped(p, inst, ops[0], sizes)


#: opcodes rewritten even when no shape around them is dynamic: no lowering exists for them, this
#: pass removes every one (docs/emulator.md's generated opcode list names them)
_ALWAYS = REWRITTEN_OPCODES = frozenset({"set-dimension-size", "dynamic-reshape"})
_SUPPORTED = ("set-dimension-size", "get-dimension-size", "element-wise ops", "broadcast", "transpose", "reduce",
              "dot", "slice", "pad", "concatenate", "reverse", "reshape", "dynamic-reshape", "tuple",
              "get-tuple-element", "while", "conditional", "call", "sort", "gather", "scatter", "reduce-window",
              "dynamic-slice", "dynamic-update-slice")


def clone_computation(comp: HloComputation, name: str) -> tuple[HloComputation, dict[int, HloInstruction]]:
    """A copy of `comp` (same callees) named `name`, and the copy of each instruction by id."""
    copy = HloComputation(name)
    copy.attributes.CopyFrom(comp.attributes)
    copy.attributes.ClearField("program_shape")  # the parameters change
    new: dict[int, HloInstruction] = {}
    for inst in schedule(comp):
        c = HloInstruction(inst.name, inst.opcode, inst.shape, [new[id(o)] for o in inst.operands],
                           called_computations=list(inst.called_computations),
                           control_predecessors=[new[id(o)] for o in inst.control_predecessors if id(o) in new])
        c.attributes.CopyFrom(inst.attributes)
        new[id(inst)] = copy.add(c)
    copy.root = new[id(comp.root)]
    return copy, new


def calls_dynamic(comp: HloComputation, _seen: set[int] | None = None) -> bool:
    """Whether `comp`, or a computation it calls, holds a dynamic shape or an opcode only this pass
    removes (so that a while, conditional or call around it must be rewritten)."""
    seen = _seen if _seen is not None else set()
    if id(comp) in seen:
        return False
    seen.add(id(comp))
    return any(_is_dynamic(inst.shape) or inst.opcode in REWRITTEN_OPCODES or
               any(calls_dynamic(c, seen) for c in inst.called_computations) for inst in comp.instructions)


def pad_dynamic_shapes(module: HloModule) -> HloModule:
    """`module` itself when no shape in it is dynamic, else a rewritten copy with static shapes only.

    The entry is rewritten in place of the copy; a while, conditional or call whose computations
    meet a dynamic dimension gets rewritten copies of them (dynamic_calls.py), so a computation
    called from several places is rewritten for each. Computations no longer called are dropped."""
    if not has_dynamic_shapes(module):
        return module
    module = module_from_proto(module_to_proto(module))
    for inst in module.instructions():
        if any(d < 0 for leaf in inst.shape.leaves() for d in leaf.dimensions):
            raise CompileError(f"an unbounded dynamic dimension ({inst.shape}) is not supported: a padded "
                               "buffer needs a bound (write <=N)", inst)
    entry = module.entry
    padder = Padder(entry, module)
    padder.run(schedule(entry))
    root = entry.root
    result = padder.v(root)
    entry.root = _compacted(padder, root, result, padder.s(root))
    # the replaced instructions (set-dimension-size, get-dimension-size, ...) still hold dynamic
    # shapes: keep what the root reaches
    entry.instructions = schedule(entry)
    module.computations = _reachable(entry)
    for comp in module.computations:
        for inst in comp.instructions:
            if _is_dynamic(inst.shape) or inst.opcode in REWRITTEN_OPCODES:
                user = next((f"{i.opcode} {i.name!r}" for c in module.computations for i in c.instructions
                             if comp in i.called_computations), "?")
                raise CompileError(f"a dynamic dimension inside computation {comp.name}, applied by {user}, is "
                                   "not supported: the dynamic padder rewrites the computations of while, "
                                   "conditional and call", inst)
    return module


def _reachable(entry: HloComputation) -> list[HloComputation]:
    """The computations `entry` reaches, callees before callers (XLA's order), entry last."""
    order: list[HloComputation] = []
    seen: set[int] = set()

    def visit(comp: HloComputation) -> None:
        seen.add(id(comp))
        for inst in comp.instructions:
            for c in inst.called_computations:
                if id(c) not in seen:
                    visit(c)
        order.append(comp)

    visit(entry)
    return order


def _compacted(p: Padder, root: HloInstruction, value: HloInstruction, sizes: Sizes) -> HloInstruction:
    """The entry's result as XLA:CPU returns a dynamic array: valid elements first, row-major."""
    p.base = root
    shape = value.shape
    if shape.is_tuple:
        if not _dynamic_sizes(sizes):
            return value
        parts = [_compacted(p, root, p.add("get-tuple-element", s, [value], tuple_index=k), sz)
                 for k, (s, sz) in enumerate(zip(shape.tuple_shapes, sizes))]
        return p.add("tuple", shape, parts)
    if not _dynamic_sizes(sizes):
        return value
    flat = p.relayout(value, sizes, (shape.num_elements,), (math.prod(shape.dimensions),))
    # relayout to a 1-D buffer puts logical element L at L; then the bound's shape
    return p.add("reshape", shape, [flat]) if shape.rank != 1 else flat
