"""Data movement: constants, broadcast, reshape, transpose, slice, concatenate, pad, reverse,
iota, tuple elements, dynamic slices, reduce-precision (tuple, opt-barrier, convert,
bitcast-convert and dynamic-update-slice are lowered generically: registry.py)."""
from __future__ import annotations

from typing import Any

import numpy as np

from neuron_customcall.compiler.errors import CompileError
from neuron_customcall.compiler.lowering.registry import lowers
from neuron_customcall.compiler.lowering.context import LowerCtx


@lowers("constant")
def _constant(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    if inst.shape.is_tuple:
        raise CompileError("tuple-shaped constants are not supported", inst)
    try:
        value = np.asarray(inst.constant_value())
    except Exception as e:  # noqa: BLE001 - hlo raises HloError; report it with the instruction
        raise CompileError(f"can not decode the literal: {e}", inst) from None
    dims = tuple(inst.shape.dimensions)
    if value.shape != dims:
        if value.size != int(np.prod(dims)):
            raise CompileError(f"literal holds {value.size} elements, the shape {inst.shape} needs {int(np.prod(dims))}", inst)
        value = value.reshape(dims)
    return "constant", {"index": ctx.constant(value.astype(inst.shape.dtype, copy=False))}


def _same_shape(inst: Any) -> bool:
    return not inst.operands[0].shape.is_tuple and tuple(inst.operands[0].shape.dimensions) == tuple(inst.shape.dimensions)


@lowers("broadcast")
def _broadcast(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    dims = list(inst.attributes.dimensions)
    if _same_shape(inst) and dims == list(range(len(dims))):
        return "copy", {}
    return "broadcast", {"dims": dims}


def _descending(shape: Any) -> bool:
    return shape.layout is None or tuple(shape.layout.minor_to_major) in ((), tuple(range(shape.rank - 1, -1, -1)))


@lowers("reshape", "bitcast")
def _reshape(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    if inst.opcode == "bitcast":
        src = inst.operands[0].shape
        if src.element_type != inst.shape.element_type or not (_descending(src) and _descending(inst.shape)):
            raise CompileError("bitcast that changes the element type or the layout is not supported", inst)
    if _same_shape(inst):
        return "copy", {}
    return "reshape", {}


@lowers("transpose")
def _transpose(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    perm = list(inst.attributes.dimensions)
    if perm == list(range(len(perm))) or id(inst) in ctx.absorbed:
        return "copy", {}
    return "transpose", {"perm": perm}


@lowers("slice")
def _slice(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    sd = inst.attributes.slice_dimensions
    return "slice", {"start": [d.start for d in sd], "limit": [d.limit for d in sd],
                     "stride": [d.stride or 1 for d in sd]}


@lowers("concatenate")
def _concatenate(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return "concatenate", {"axis": int(inst.attributes.dimensions[0])}


@lowers("pad")
def _pad(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    pc = inst.attributes.padding_config.dimensions
    return "pad", {"low": [d.edge_padding_low for d in pc], "high": [d.edge_padding_high for d in pc],
                   "interior": [d.interior_padding for d in pc]}


@lowers("reverse")
def _reverse(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return "reverse", {"dims": list(inst.attributes.dimensions)}


@lowers("iota")
def _iota(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    dims = list(inst.attributes.dimensions)
    return "iota", {"dim": int(dims[0]) if dims else 0}


@lowers("get-tuple-element")
def _gte(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return "get-tuple-element", {"index": int(inst.attributes.tuple_index)}


@lowers("dynamic-slice")
def _dynamic_slice(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return "dynamic-slice", {"sizes": list(inst.attributes.dynamic_slice_sizes)}


@lowers("reduce-precision")
def _reduce_precision(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return "reduce-precision", {"exponent_bits": int(inst.attributes.exponent_bits),
                                "mantissa_bits": int(inst.attributes.mantissa_bits)}
