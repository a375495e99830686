"""Shape verification before lowering: operand counts (XLA's, from hlo.opcodes), and the shape rules of the opcodes whose
handlers rely on them (element-wise, broadcast, reshape, transpose, dot, slice, concatenate,
tuples, control flow). Also rejects opcodes without a lowering, naming them. Linear time."""
from __future__ import annotations

import math
from typing import Any

from hlo.opcodes import ELEMENTWISE, OPCODES
from neuron_customcall.compiler.errors import CompileError
from neuron_customcall.compiler.lowering import lowering_for

#: Binary element-wise opcodes lowered here whose operands need not share an element type.
_MIXED_TYPE_BINARY = frozenset({"complex", "compare"})


def _dims(shape: Any) -> tuple[int, ...]:
    return tuple(shape.dimensions)


def _leaf_types(shape: Any) -> list[tuple[str, tuple[int, ...]]]:
    """A (possibly tuple) shape's element types and dimensions, leaf by leaf (layouts aside)."""
    return [(leaf.element_type, _dims(leaf)) for leaf in shape.leaves()]


def _fail(inst: Any, msg: str) -> None:
    raise CompileError(msg, inst)


def verify_instruction(inst: Any) -> None:
    op = inst.opcode
    record = OPCODES.get(op)
    if record is None:
        _fail(inst, f"{op!r} is not an HLO opcode")
    if op != "parameter" and lowering_for(op) is None:
        _fail(inst, f"opcode {op!r} is not supported by this compiler")
    arity = record.arity
    if arity is not None and len(inst.operands) != arity:
        _fail(inst, f"{op} takes {arity} operands, got {len(inst.operands)}")
    out = inst.shape
    ops = [o.shape for o in inst.operands]
    if any(any(leaf.is_dynamic_dimension) for leaf in out.leaves()):
        _fail(inst, f"dynamic shapes are not supported ({out})")
    if op == "copy" and ops[0].is_tuple:  # a copy of a tuple: the same tuple shape
        if _leaf_types(ops[0]) != _leaf_types(out):
            _fail(inst, f"operand shape {ops[0]} does not match the result {out}")
    elif record.cls == ELEMENTWISE and record.arity in (1, 2):
        for s in ops:
            if s.is_tuple or _dims(s) != _dims(out):
                _fail(inst, f"operand shape {s} does not match the result {out}")
        if record.arity == 2 and op not in _MIXED_TYPE_BINARY and ops[0].element_type != ops[1].element_type:
            _fail(inst, f"operand element types differ: {ops[0].element_type} vs {ops[1].element_type}")
        if op == "compare" and out.element_type != "PRED":
            _fail(inst, "compare must produce PRED")
    elif op == "select":
        if any(o.is_tuple for o in ops):
            _fail(inst, "select of tuples is not supported")
        if _dims(ops[0]) not in ((), _dims(out)) or _dims(ops[1]) != _dims(out) or _dims(ops[2]) != _dims(out):
            _fail(inst, f"select operand shapes {[str(s) for s in ops]} do not match the result {out}")
    elif op == "broadcast":
        dims = list(inst.attributes.dimensions)
        if len(dims) != len(ops[0].dimensions) or any(
                not 0 <= d < out.rank or out.dimensions[d] != n for d, n in zip(dims, ops[0].dimensions)):
            _fail(inst, f"broadcast dimensions {dims} do not map {ops[0]} into {out}")
    elif op in ("reshape", "bitcast"):
        if math.prod(_dims(ops[0])) != math.prod(_dims(out)):
            _fail(inst, f"reshape from {ops[0]} to {out} changes the element count")
    elif op == "transpose":
        perm = list(inst.attributes.dimensions)
        if sorted(perm) != list(range(len(perm))) or len(perm) != ops[0].rank or \
                tuple(ops[0].dimensions[p] for p in perm) != _dims(out):
            _fail(inst, f"transpose {perm} does not take {ops[0]} to {out}")
    elif op == "dot":
        d = inst.attributes.dot_dimension_numbers
        l, r = ops
        lc, rc = list(d.lhs_contracting_dimensions), list(d.rhs_contracting_dimensions)
        lb, rb = list(d.lhs_batch_dimensions), list(d.rhs_batch_dimensions)
        if len(lc) != len(rc) or len(lb) != len(rb) or any(
                l.dimensions[a] != r.dimensions[b] for a, b in zip(lc + lb, rc + rb)):
            _fail(inst, f"dot dimension numbers do not fit {l} and {r}")
        lf = [l.dimensions[k] for k in range(l.rank) if k not in lc and k not in lb]
        rf = [r.dimensions[k] for k in range(r.rank) if k not in rc and k not in rb]
        if tuple([l.dimensions[k] for k in lb] + lf + rf) != _dims(out):
            _fail(inst, f"dot result should be {[l.dimensions[k] for k in lb] + lf + rf}, is {out}")
    elif op == "slice":
        sd = inst.attributes.slice_dimensions
        want = tuple(max(0, -(-(s.limit - s.start) // (s.stride or 1))) for s in sd)
        if len(sd) != ops[0].rank or want != _dims(out):
            _fail(inst, f"slice of {ops[0]} gives {list(want)}, the result is {out}")
    elif op == "concatenate":
        axis = int(inst.attributes.dimensions[0])
        total = sum(s.dimensions[axis] for s in ops)
        for s in ops:
            if s.rank != out.rank or any(a != b for k, (a, b) in enumerate(zip(s.dimensions, out.dimensions)) if k != axis):
                _fail(inst, f"concatenate operand {s} does not fit {out}")
        if out.dimensions[axis] != total:
            _fail(inst, f"concatenate along {axis} gives {total}, the result has {out.dimensions[axis]}")
    elif op == "get-tuple-element":
        k = inst.attributes.tuple_index
        if not ops[0].is_tuple or not 0 <= k < len(ops[0].tuple_shapes) or \
                _dims(ops[0].tuple_shapes[k]) != _dims(out):
            _fail(inst, f"get-tuple-element {k} of {ops[0]} is not {out}")
    elif op == "tuple":
        if not out.is_tuple or len(out.tuple_shapes) != len(ops):
            _fail(inst, f"tuple of {len(ops)} operands has shape {out}")
    elif op == "while":
        body_out = inst.called_computations[0].root.shape if inst.called_computations else None
        if body_out is not None and body_out.element_type != "PRED" and \
                (_leaf_dims(body_out) != _leaf_dims(ops[0]) or _leaf_dims(out) != _leaf_dims(ops[0])):
            _fail(inst, f"while body result {body_out} does not match its init {ops[0]}")
    elif op == "convolution":
        _verify_convolution(inst, ops[0], ops[1], out)
    elif op == "gather":
        _verify_gather(inst, ops[0], ops[1], out)
    elif op == "pad":
        pc = inst.attributes.padding_config.dimensions
        if len(pc) != ops[0].rank or any(p.interior_padding < 0 for p in pc):
            _fail(inst, f"padding config does not fit {ops[0]}")
        want = tuple(p.edge_padding_low + p.edge_padding_high + d + max(d - 1, 0) * p.interior_padding
                     for p, d in zip(pc, ops[0].dimensions))
        if want != _dims(out):
            _fail(inst, f"pad of {ops[0]} gives {list(want)}, the result is {out}")
    elif op == "reduce":
        n = len(ops) // 2
        dims = set(inst.attributes.dimensions)
        want = tuple(d for k, d in enumerate(ops[0].dimensions) if k not in dims) if ops else ()
        outs = out.tuple_shapes if out.is_tuple else (out,)
        if len(ops) % 2 or len(outs) != n or any(_dims(o) != want for o in outs) or \
                any(_dims(s) != _dims(ops[0]) for s in ops[:n]) or any(s.rank for s in ops[n:]):
            _fail(inst, f"reduce over {sorted(dims)} of {[str(s) for s in ops]} does not give {out}")
    elif op == "reduce-window":
        n = len(ops) // 2
        w = inst.attributes.window.dimensions
        outs = out.tuple_shapes if out.is_tuple else (out,)
        if len(w) != ops[0].rank:
            _fail(inst, f"window of rank {len(w)} for {ops[0]}")
        want = []
        for d, wd in zip(ops[0].dimensions, w):
            padded = wd.padding_low + wd.padding_high + (d - 1) * (wd.base_dilation or 1) + 1 if d else 0
            span = (wd.size - 1) * (wd.window_dilation or 1) + 1
            want.append((padded - span) // (wd.stride or 1) + 1 if padded >= span else 0)
        if len(ops) % 2 or len(outs) != n or any(_dims(o) != tuple(want) for o in outs):
            _fail(inst, f"reduce-window of {ops[0]} gives {want}, the result is {out}")
    elif op == "dynamic-slice":
        sizes = list(inst.attributes.dynamic_slice_sizes)
        if len(ops) != 1 + ops[0].rank or len(sizes) != ops[0].rank or \
                any(not 0 <= z <= d for z, d in zip(sizes, ops[0].dimensions)) or tuple(sizes) != _dims(out):
            _fail(inst, f"dynamic-slice sizes {sizes} do not fit {ops[0]} -> {out}")
    elif op == "dynamic-update-slice":
        if len(ops) != 2 + ops[0].rank or ops[1].rank != ops[0].rank or \
                any(u > d for u, d in zip(ops[1].dimensions, ops[0].dimensions)) or _dims(out) != _dims(ops[0]):
            _fail(inst, f"dynamic-update-slice of {ops[1]} into {ops[0]} does not fit")
    elif op == "iota":
        dims = list(inst.attributes.dimensions)
        if out.rank and (len(dims) != 1 or not 0 <= dims[0] < out.rank):
            _fail(inst, f"iota dimension {dims} out of range for {out}")
    elif op == "conditional":
        for b in inst.called_computations:
            if _leaf_dims(b.root.shape) != _leaf_dims(out):
                _fail(inst, f"branch {b.name} returns {b.root.shape}, the conditional {out}")


def _verify_convolution(inst: Any, lhs: Any, rhs: Any, out: Any) -> None:
    """XLA's shape rule for convolution: feature and batch groups, and each output spatial size."""
    c = inst.attributes.convolution_dimension_numbers
    fgc = inst.attributes.feature_group_count or 1
    bgc = inst.attributes.batch_group_count or 1
    w = inst.attributes.window.dimensions
    nsp = len(c.input_spatial_dimensions)
    ranks_ok = lhs.rank == rhs.rank == out.rank == nsp + 2 and len(w) == nsp and \
        len(c.kernel_spatial_dimensions) == len(c.output_spatial_dimensions) == nsp
    if not ranks_ok:
        _fail(inst, f"convolution ranks do not fit: {lhs}, {rhs} -> {out} with {nsp} spatial dims")
    cin, batch = lhs.dimensions[c.input_feature_dimension], lhs.dimensions[c.input_batch_dimension]
    kin, kout = rhs.dimensions[c.kernel_input_feature_dimension], rhs.dimensions[c.kernel_output_feature_dimension]
    if cin != kin * fgc or kout % fgc or kout % bgc or batch % bgc or (fgc > 1 and bgc > 1):
        _fail(inst, f"convolution features/groups do not fit: input features {cin}, kernel {kin}->{kout}, "
                    f"feature_group_count {fgc}, batch_group_count {bgc}, batch {batch}")
    want = [0] * out.rank
    want[c.output_batch_dimension] = batch // bgc
    want[c.output_feature_dimension] = kout
    for k in range(nsp):
        d = lhs.dimensions[c.input_spatial_dimensions[k]]
        wd = w[k]
        if wd.size != rhs.dimensions[c.kernel_spatial_dimensions[k]]:
            _fail(inst, f"window size {wd.size} differs from kernel spatial size in dim {k}")
        padded = wd.padding_low + wd.padding_high + ((d - 1) * (wd.base_dilation or 1) + 1 if d else 0)
        span = (wd.size - 1) * (wd.window_dilation or 1) + 1
        want[c.output_spatial_dimensions[k]] = (padded - span) // (wd.stride or 1) + 1 if padded >= span else 0
    if tuple(want) != _dims(out):
        _fail(inst, f"convolution of {lhs} by {rhs} gives {want}, the result is {out}")


def _verify_gather(inst: Any, operand: Any, indices: Any, out: Any) -> None:
    """XLA's shape rule for gather: batch dims of the indices and the kept slice sizes, placed."""
    g = inst.attributes.gather_dimension_numbers
    sizes = list(inst.attributes.gather_slice_sizes)
    ivd = g.index_vector_dim
    if len(sizes) != operand.rank or any(not 0 <= z <= d for z, d in zip(sizes, operand.dimensions)):
        _fail(inst, f"slice sizes {sizes} do not fit {operand}")
    removed = set(g.collapsed_slice_dims) | set(g.operand_batching_dims)
    if any(sizes[d] != 1 for d in removed):
        _fail(inst, "collapsed and batching dims must have slice size 1")
    nvec = indices.dimensions[ivd] if ivd < indices.rank else 1
    if nvec != len(g.start_index_map):
        _fail(inst, f"index vectors of {nvec} do not match start_index_map {list(g.start_index_map)}")
    batch = [d for k, d in enumerate(indices.dimensions) if k != ivd]
    offsets = [sizes[d] for d in range(operand.rank) if d not in removed]
    if out.rank != len(batch) + len(offsets) or len(g.offset_dims) != len(offsets):
        _fail(inst, f"gather from {operand} with indices {indices} can not give {out}")
    want, bi, oi = [], iter(batch), iter(offsets)
    for k in range(out.rank):
        want.append(next(oi) if k in g.offset_dims else next(bi))
    if tuple(want) != _dims(out):
        _fail(inst, f"gather gives {want}, the result is {out}")


def _leaf_dims(shape: Any) -> list[tuple[str, tuple[int, ...]]]:
    return [(s.element_type, _dims(s)) for s in shape.leaves()]


def verify_computation(comp: Any, order: list[Any]) -> None:
    for inst in order:
        verify_instruction(inst)
