"""Gather and scatter (dimension numbers passed through; the update computation runs lifted)."""
from __future__ import annotations

from typing import Any

from neuron_customcall.compiler.lowering.registry import lowers
from neuron_customcall.compiler.lowering.context import LowerCtx, binary_reducer, called


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
