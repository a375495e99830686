"""Gather and scatter (dimension numbers passed through; the update computation runs lifted)."""
from __future__ import annotations

from typing import Any

from neuron_customcall.compiler.lowering.context import LowerCtx, binary_reducer, called
from neuron_customcall.compiler.lowering.registry import fail, lowers, shape_dims, shape_rule, shapes


@lowers("gather")
def _gather(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    g = inst.attributes.gather_dimension_numbers
    return "gather", {
        "offset_dims": list(g.offset_dims), "collapsed_slice_dims": list(g.collapsed_slice_dims),
        "start_index_map": list(g.start_index_map), "index_vector_dim": int(g.index_vector_dim),
        "operand_batching_dims": list(g.operand_batching_dims),
        "start_indices_batching_dims": list(g.start_indices_batching_dims),
        "slice_sizes": list(inst.attributes.gather_slice_sizes),
    }


@lowers("scatter")
def _scatter(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    s = inst.attributes.scatter_dimension_numbers
    comp = called(inst, 0, "update")
    n = (len(inst.operands) - 1) // 2
    return "scatter", {
        "update_window_dims": list(s.update_window_dims), "inserted_window_dims": list(s.inserted_window_dims),
        "scatter_dims_to_operand_dims": list(s.scatter_dims_to_operand_dims),
        "index_vector_dim": int(s.index_vector_dim), "input_batching_dims": list(s.input_batching_dims),
        "scatter_indices_batching_dims": list(s.scatter_indices_batching_dims),
        "computation": ctx.computation(comp, lifted=True), "reducer": binary_reducer(comp) if n == 1 else "",
    }


# -- shape rules (XLA's; run by the verifier before lowering) ------------------------------
@shape_rule("gather")
def _gather_shapes(inst: Any) -> None:
    """XLA's shape rule for gather: batch dims of the indices and the kept slice sizes, placed."""
    (operand, indices), out = shapes(inst)
    g = inst.attributes.gather_dimension_numbers
    sizes = list(inst.attributes.gather_slice_sizes)
    ivd = g.index_vector_dim
    if len(sizes) != operand.rank or any(not 0 <= z <= d for z, d in zip(sizes, operand.dimensions)):
        fail(inst, f"slice sizes {sizes} do not fit {operand}")
    removed = set(g.collapsed_slice_dims) | set(g.operand_batching_dims)
    if any(sizes[d] != 1 for d in removed):
        fail(inst, "collapsed and batching dims must have slice size 1")
    nvec = indices.dimensions[ivd] if ivd < indices.rank else 1
    if nvec != len(g.start_index_map):
        fail(inst, f"index vectors of {nvec} do not match start_index_map {list(g.start_index_map)}")
    batch = [d for k, d in enumerate(indices.dimensions) if k != ivd]
    offsets = [sizes[d] for d in range(operand.rank) if d not in removed]
    if out.rank != len(batch) + len(offsets) or len(g.offset_dims) != len(offsets):
        fail(inst, f"gather from {operand} with indices {indices} can not give {out}")
    want, bi, oi = [], iter(batch), iter(offsets)
    for k in range(out.rank):
        want.append(next(oi) if k in g.offset_dims else next(bi))
    if tuple(want) != shape_dims(out):
        fail(inst, f"gather gives {want}, the result is {out}")
