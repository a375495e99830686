"""Reductions: reduce, reduce-window, select-and-scatter, map (their computations run lifted)."""
from __future__ import annotations

from typing import Any

from neuron_customcall.compiler.errors import CompileError
from neuron_customcall.compiler.lowering.context import LowerCtx, argminmax_reducer, binary_reducer, called
from neuron_customcall.compiler.lowering.registry import fail, lowers, shape_dims, shape_rule, shapes


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


# -- shape rules (XLA's; run by the verifier before lowering) ------------------------------
@shape_rule("reduce")
def _reduce_shapes(inst: Any) -> None:
    ops, out = shapes(inst)
    n = len(ops) // 2
    dims = set(inst.attributes.dimensions)
    want = tuple(d for k, d in enumerate(ops[0].dimensions) if k not in dims) if ops else ()
    outs = out.tuple_shapes if out.is_tuple else (out,)
    if len(ops) % 2 or len(outs) != n or any(shape_dims(o) != want for o in outs) or \
            any(shape_dims(s) != shape_dims(ops[0]) for s in ops[:n]) or any(s.rank for s in ops[n:]):
        fail(inst, f"reduce over {sorted(dims)} of {[str(s) for s in ops]} does not give {out}")


@shape_rule("reduce-window")
def _reduce_window_shapes(inst: Any) -> None:
    ops, out = shapes(inst)
    n = len(ops) // 2
    w = inst.attributes.window.dimensions
    outs = out.tuple_shapes if out.is_tuple else (out,)
    if len(w) != ops[0].rank:
        fail(inst, f"window of rank {len(w)} for {ops[0]}")
    want = []
    for d, wd in zip(ops[0].dimensions, w):
        # a zero-sized dimension dilates to 0 elements, and its padding still counts (XLA's rule)
        padded = wd.padding_low + wd.padding_high + ((d - 1) * (wd.base_dilation or 1) + 1 if d else 0)
        span = (wd.size - 1) * (wd.window_dilation or 1) + 1
        want.append((padded - span) // (wd.stride or 1) + 1 if padded >= span else 0)
    if len(ops) % 2 or len(outs) != n or any(shape_dims(o) != tuple(want) for o in outs):
        fail(inst, f"reduce-window of {ops[0]} gives {want}, the result is {out}")
