"""Sort, gather, scatter, reduce-window, dynamic-slice and dynamic-update-slice over a dynamic
dimension (the dynamic padder's handlers for them).

XLA's semantics (its dynamic padder and dynamic dimension inference), which these follow:
- `sort` along a dynamic dimension sorts the valid elements and leaves the padding after them: the
  sort gets one more operand, whether each element is inside the size, and a comparator that puts
  an inside element before an outside one (and compares two inside ones as before);
- `gather`: a dynamic dimension of the indices' batch dimensions is one of the result; of the
  operand, it disappears when a slice takes one element of it and is kept where a slice takes
  all of it (XLA refuses anything else); nothing is masked (an index into the padding reads
  unspecified values, as on XLA);
- `scatter`: the result has the operand's sizes; the padding of the indices is set to the largest
  index, so the updates there fall outside the operand and are skipped;
- `reduce-window` masks the padding with the init value along dynamic dimensions whose window is
  larger than 1; the result's size is XLA's `(size + stride - window') / stride` (window' the
  dilated window) for a non-trivial window dimension, whatever its padding, as XLA computes it;
- `dynamic-slice` of a whole dynamic dimension keeps its size, of one element drops it;
  `dynamic-update-slice` keeps the operand's sizes, and the padding of a smaller dynamic update is
  replaced by the operand's elements so that it overwrites nothing.
"""
from __future__ import annotations

import numpy as np

from hlo.ir.dtypes import numpy_dtype
from hlo.ir.module import HloComputation, HloInstruction
from hlo.ir.shape import Shape
from neuron_customcall.compiler.dynamic_padder import (Padder, Size, Sizes, _set_size, _static_sizes, clone_computation,
                                                       handles)
from neuron_customcall.compiler.errors import CompileError


def _first_dynamic(p: Padder, operands: list[HloInstruction]) -> tuple[Size, ...]:
    """Per dimension, the first operand's run-time size there (operands of one shape)."""
    sizes: list[Size] = list(_static_sizes(operands[0].shape))  # type: ignore[arg-type]
    for o in operands:
        for d, s in enumerate(p.s(o)):
            if isinstance(s, HloInstruction) and not isinstance(sizes[d], HloInstruction):
                sizes[d] = s
    return tuple(sizes)


def _per_output(shape: Shape, sizes: tuple[Size, ...]) -> Sizes:
    """The sizes of a result of `shape` whose every output has `sizes`."""
    return tuple(sizes for _ in shape.tuple_shapes) if shape.is_tuple else sizes


@handles("sort")
def _sort(p: Padder, inst: HloInstruction, ops: list[HloInstruction]) -> tuple[HloInstruction, Sizes]:
    dim = inst.attributes.dimensions[0]
    sizes = _first_dynamic(p, ops)
    if not isinstance(sizes[dim], HloInstruction):
        return inst, _per_output(inst.shape, sizes)  # the padding of other dimensions sorts among itself
    bounds = ops[0].shape.dimensions
    iota = p.add("iota", Shape.array("S32", bounds), [], dimensions=[dim])
    inside = p.add("compare", Shape.array("PRED", bounds), [iota, p.bcast(sizes[dim], bounds)], direction="LT")
    inst.called_computations = [_inside_first(p, inst.called_computations[0])]
    outputs = list(inst.shape.tuple_shapes) if inst.shape.is_tuple else [inst.shape]
    shape = inst.shape
    inst.operands = inst.operands + [inside]
    inst.shape = Shape.tuple_of(outputs + [inside.shape])
    parts = [p.add("get-tuple-element", s, [inst], tuple_index=k) for k, s in enumerate(outputs)]
    value = p.add("tuple", shape, parts) if shape.is_tuple else parts[0]
    return value, _per_output(shape, sizes)


def _inside_first(p: Padder, comparator: HloComputation) -> HloComputation:
    """The comparator with two more parameters (lhs inside, rhs inside): lhs_in and (less or not
    rhs_in), XLA's rule, a strict weak order that puts the padding last."""
    taken = {c.name for c in p.module.computations}
    k = 1
    while f"{comparator.name}.inside{k}" in taken:
        k += 1
    comp, _ = clone_computation(comparator, f"{comparator.name}.inside{k}")
    n = len(comp.parameters)
    scalar = Shape.array("PRED", ())
    flags = []
    for j, what in enumerate(("lhs", "rhs")):
        param = comp.add(HloInstruction(f"inside_{what}.{k}", "parameter", scalar))
        param.attributes.parameter_number = n + j
        flags.append(param)
    rhs_out = comp.add(HloInstruction(f"outside_rhs.{k}", "not", scalar, [flags[1]]))
    either = comp.add(HloInstruction(f"less_or_outside_rhs.{k}", "or", scalar, [comp.root, rhs_out]))
    comp.root = comp.add(HloInstruction(f"inside_first.{k}", "and", scalar, [flags[0], either]))
    p.module.add(comp)
    return comp


@handles("gather")
def _gather(p: Padder, inst: HloInstruction, ops: list[HloInstruction]) -> tuple[HloInstruction, Sizes]:
    g = inst.attributes.gather_dimension_numbers
    out: list[Size] = list(inst.shape.dimensions)
    slice_sizes = list(inst.attributes.gather_slice_sizes)
    # the operand dimensions a slice keeps, in order, are the result's offset dimensions
    kept = [d for d in range(ops[0].shape.rank) if d not in g.collapsed_slice_dims and d not in g.operand_batching_dims]
    for d, s in enumerate(p.s(ops[0])):
        if not isinstance(s, HloInstruction) or slice_sizes[d] == 1:
            continue
        if slice_sizes[d] != ops[0].shape.dimensions[d] or d not in kept:
            raise CompileError(f"gather of a part ({slice_sizes[d]} of {ops[0].shape.dimensions[d]}) of dynamic "
                               f"operand dimension {d} is not supported (XLA refuses it too)", inst)
        out[g.offset_dims[kept.index(d)]] = s
    batch_out = [d for d in range(inst.shape.rank) if d not in g.offset_dims]
    batch_in = [d for d in range(ops[1].shape.rank) if d != g.index_vector_dim]
    for d, s in enumerate(p.s(ops[1])):
        if not isinstance(s, HloInstruction):
            continue
        if d == g.index_vector_dim:
            raise CompileError("gather with a dynamic index vector dimension is not supported (XLA refuses it too)",
                               inst)
        out[batch_out[batch_in.index(d)]] = s
    return inst, tuple(out)


@handles("scatter")
def _scatter(p: Padder, inst: HloInstruction, ops: list[HloInstruction]) -> tuple[HloInstruction, Sizes]:
    n = (len(ops) - 1) // 2
    sd = inst.attributes.scatter_dimension_numbers
    indices = ops[n]
    index_sizes = p.s(indices)
    dynamic = [d for d, s in enumerate(index_sizes) if isinstance(s, HloInstruction)]
    if dynamic:
        et = indices.shape.element_type
        largest = p.const(np.iinfo(numpy_dtype(et)).max, et)
        inst.operands[n] = p.mask(p.v(indices), index_sizes, dynamic, largest)
    window_in_operand = [d for d in range(ops[0].shape.rank)
                         if d not in sd.inserted_window_dims and d not in sd.input_batching_dims]
    operand_sizes = _first_dynamic(p, ops[:n])
    for u in ops[n + 1:]:
        for d, s in enumerate(p.s(u)):
            if not isinstance(s, HloInstruction) or d not in sd.update_window_dims:
                continue
            od = window_in_operand[list(sd.update_window_dims).index(d)]
            if u.shape.dimensions[d] != ops[0].shape.dimensions[od] or \
                    (isinstance(operand_sizes[od], HloInstruction) and operand_sizes[od] is not s):
                raise CompileError(f"scatter whose update window dimension {d} is dynamic and not the operand's "
                                   "whole dimension with its size is not supported (XLA refuses it too)", inst)
    return inst, _per_output(inst.shape, operand_sizes)


def _trivial(w: object) -> bool:
    return (w.size == 1 and (w.stride or 1) == 1 and not w.padding_low and not w.padding_high  # type: ignore[attr-defined]
            and (w.window_dilation or 1) == 1 and (w.base_dilation or 1) == 1)  # type: ignore[attr-defined]


@handles("reduce-window")
def _reduce_window(p: Padder, inst: HloInstruction, ops: list[HloInstruction]) -> tuple[HloInstruction, Sizes]:
    n = len(ops) // 2
    window = inst.attributes.window.dimensions
    sizes = _first_dynamic(p, ops[:n])
    masked = [d for d, s in enumerate(sizes) if isinstance(s, HloInstruction) and window[d].size != 1]
    inst.operands = [p.mask(p.v(x), p.s(x), masked, p.v(init)) for x, init in zip(ops[:n], ops[n:])] + \
        [p.v(init) for init in ops[n:]]
    bounds = (inst.shape.tuple_shapes[0] if inst.shape.is_tuple else inst.shape).dimensions
    out: list[Size] = list(bounds)
    for d, s in enumerate(sizes):
        if not isinstance(s, HloInstruction):
            continue
        w = window[d]
        if _trivial(w):
            out[d] = s
            continue
        stride = w.stride or 1
        effective = (w.size - 1) * (w.window_dilation or 1) + 1
        size = p.arith("divide", p.arith("add", s, stride - effective), stride)
        out[d] = p.arith("minimum", p.arith("maximum", size, 0), bounds[d])
    return inst, _per_output(inst.shape, tuple(out))


@handles("dynamic-slice")
def _dynamic_slice(p: Padder, inst: HloInstruction, ops: list[HloInstruction]) -> tuple[HloInstruction, Sizes]:
    out: list[Size] = list(inst.shape.dimensions)
    for d, s in enumerate(p.s(ops[0])):
        if not isinstance(s, HloInstruction) or inst.shape.dimensions[d] == 1:
            continue
        if inst.shape.dimensions[d] != ops[0].shape.dimensions[d]:
            raise CompileError(f"dynamic-slice of a part of dynamic dimension {d} is not supported (XLA refuses it "
                               "too)", inst)
        out[d] = s
    return inst, tuple(out)


@handles("dynamic-update-slice")
def _dynamic_update_slice(p: Padder, inst: HloInstruction, ops: list[HloInstruction]) -> tuple[HloInstruction, Sizes]:
    base, update = ops[0], ops[1]
    out = p.s(base)
    partial = [d for d, s in enumerate(p.s(update))
               if isinstance(s, HloInstruction) and update.shape.dimensions[d] < base.shape.dimensions[d]]
    for d, s in enumerate(p.s(update)):
        if isinstance(s, HloInstruction) and d not in partial:
            out = _set_size(d, out, s)  # type: ignore[arg-type]  # XLA: the update's size, as the later operand
    if partial:
        # the update's padding must not overwrite the operand: fill it with what it would overwrite
        starts = inst.operands[2:]
        under = p.add("dynamic-slice", Shape.array(update.shape.element_type, update.shape.dimensions),
                      [inst.operands[0]] + starts, dynamic_slice_sizes=update.shape.dimensions)
        inst.operands[1] = _keep_inside(p, inst.operands[1], p.s(update), partial, under)
    return inst, out


def _keep_inside(p: Padder, x: HloInstruction, sizes: Sizes, dims: list[int], other: HloInstruction) -> HloInstruction:
    """x inside its sizes along dims, `other` (same shape) outside."""
    bounds = x.shape.dimensions
    keep = None
    for d in dims:
        iota = p.add("iota", Shape.array("S32", bounds), [], dimensions=[d])
        inside = p.add("compare", Shape.array("PRED", bounds), [iota, p.bcast(sizes[d], bounds)],  # type: ignore[arg-type]
                       direction="LT")
        keep = inside if keep is None else p.add("and", inside.shape, [keep, inside])
    assert keep is not None
    return p.add("select", x.shape, [keep, x, other])
