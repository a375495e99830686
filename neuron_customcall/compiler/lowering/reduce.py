"""Reductions: reduce, reduce-window, select-and-scatter, map (their computations run lifted)."""
from __future__ import annotations

from typing import Any

from neuron_customcall.compiler.errors import CompileError
from neuron_customcall.compiler.lowering.registry import lowers
from neuron_customcall.compiler.lowering.context import LowerCtx, argminmax_reducer, binary_reducer, called


def window_attrs(inst: Any, rank: int) -> dict:
    dims = inst.attributes.window.dimensions
    if len(dims) != rank:
        raise CompileError(f"window has {len(dims)} dimensions, the operand rank is {rank}", inst)
    return {
        "size": [d.size for d in dims], "stride": [d.stride or 1 for d in dims],
        "pad_low": [d.padding_low for d in dims], "pad_high": [d.padding_high for d in dims],
        "base_dilation": [d.base_dilation or 1 for d in dims],
        "window_dilation": [d.window_dilation or 1 for d in dims],
    }


def _fast(comp: Any, n: int) -> str:
    r = binary_reducer(comp) if n == 1 else ""
    return "" if r == "replace" else r


@lowers("reduce")
def _reduce(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    comp = called(inst, 0, "to_apply")
    n = len(inst.operands) // 2
    # argmax/argmin: JAX's (value, index) comparator, run as NumPy's argmax/argmin
    reducer = argminmax_reducer(comp) if n == 2 else _fast(comp, n)
    return "reduce", {"dims": sorted(inst.attributes.dimensions), "computation": ctx.computation(comp, lifted=True),
                      "reducer": reducer}


@lowers("reduce-window")
def _reduce_window(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    comp = called(inst, 0, "to_apply")
    n = len(inst.operands) // 2
    if any(d.window_reversal for d in inst.attributes.window.dimensions):
        raise CompileError("window_reversal in reduce-window is not supported", inst)
    return "reduce-window", {**window_attrs(inst, len(inst.operands[0].shape.dimensions)),
                             "computation": ctx.computation(comp, lifted=True), "reducer": _fast(comp, n)}


@lowers("select-and-scatter")
def _select_and_scatter(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    select, scatter = called(inst, 0, "select"), called(inst, 1, "scatter")
    w = window_attrs(inst, len(inst.operands[0].shape.dimensions))
    if any(b != 1 for b in w["base_dilation"]):
        raise CompileError("base dilation in select-and-scatter is not supported", inst)
    return "select-and-scatter", {**w, "select": ctx.computation(select, lifted=True),
                                  "scatter": ctx.computation(scatter, lifted=True), "reducer": _fast(scatter, 1)}


@lowers("map")
def _map(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return "map", {"computation": ctx.computation(called(inst, 0, "to_apply"), lifted=True)}
