"""Data movement: constants, broadcast, reshape, transpose, slice, concatenate, pad, reverse,
iota, tuple elements, dynamic slices, reduce-precision, bitcast and bitcast-convert (tuple,
opt-barrier, convert and dynamic-update-slice are lowered generically: registry.py)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from hlo.ir.dtypes import bit_width
from neuron_customcall.compiler.errors import CompileError
from neuron_customcall.compiler.lowering.context import LowerCtx
from neuron_customcall.compiler.lowering.registry import (fail, leaf_types, lowers, same_as_operand, shape_dims,
                                                          shape_rule, shapes)
from neuron_customcall.compiler.subbyte import element_types


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


def _major_to_minor(shape: Any) -> list[int]:
    if shape.layout is None or not tuple(shape.layout.minor_to_major):
        return list(range(shape.rank))
    return list(reversed(shape.layout.minor_to_major))


def _bitcast_as_transpose(inst: Any) -> list[int] | None:
    """The permutation a same-type bitcast is, when both shapes have the same dimensions in
    physical (major-to-minor) order: what layout normalisation writes, e.g. f32[512,64]{0,1} ->
    f32[64,512]{1,0}. Output dim i is the operand dim that sits at i's physical position."""
    src, dst = inst.operands[0].shape, inst.shape
    a, b = _major_to_minor(src), _major_to_minor(dst)
    if len(a) != len(b) or [src.dimensions[k] for k in a] != [dst.dimensions[k] for k in b]:
        return None
    position = {axis: j for j, axis in enumerate(b)}
    return [a[position[i]] for i in range(len(b))]


def _whole_bytes(element_type: str) -> bool:
    return bit_width(element_type) % 8 == 0


@lowers("reshape", "bitcast")
def _reshape(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    if inst.opcode == "bitcast":
        src = inst.operands[0].shape
        if src.element_type != inst.shape.element_type:
            if not (_whole_bytes(src.element_type) and _whole_bytes(inst.shape.element_type)):
                raise CompileError("bitcast that changes the element type to or from a type narrower than a byte "
                                   "is not supported (bitcast-convert is)", inst)
            return "bitcast", {"src_order": _major_to_minor(src), "dst_order": _major_to_minor(inst.shape)}
        if not (_descending(src) and _descending(inst.shape)):
            perm = _bitcast_as_transpose(inst)
            if perm is None:  # both the layout and the physical shape change: reinterpret the buffer
                return "bitcast", {"src_order": _major_to_minor(src), "dst_order": _major_to_minor(inst.shape)}
            return ("copy", {}) if perm == list(range(len(perm))) else ("transpose", {"perm": perm})
    if _same_shape(inst):
        return "copy", {}
    return "reshape", {}


def bitcast_convert_types(inst: Any) -> tuple[str, str]:
    """The element types a bitcast-convert reinterprets between, as written (s4/u4/s2/u2 are
    computed in 8 bits: the sub-byte pass recorded their narrow types)."""
    (src,), dst = element_types(inst)
    return src, dst


@lowers("bitcast-convert")
def _bitcast_convert(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    """Whole bytes on both sides: the memory view (bitcast-convert); a type narrower than a byte
    on either side, whose values the emulator holds one to a byte: bitcast-bits, which packs."""
    src, dst = (bit_width(t) for t in bitcast_convert_types(inst))
    if src % 8 == 0 and dst % 8 == 0:
        return "bitcast-convert", {}
    return "bitcast-bits", {"src_bits": src, "dst_bits": dst}


@shape_rule("bitcast-convert")
def _bitcast_convert_shapes(inst: Any) -> None:
    """XLA's rule: the same dimensions for the same width; the narrower side has one more,
    trailing, dimension of the width ratio."""
    ops, out = shapes(inst)
    if ops[0].is_tuple or out.is_tuple:
        fail(inst, "bitcast-convert of tuples is not supported")
    src_type, dst_type = bitcast_convert_types(inst)
    src, dst = bit_width(src_type), bit_width(dst_type)
    a, b = shape_dims(ops[0]), shape_dims(out)
    if src == dst:
        ok = a == b
    elif src < dst:
        ok = dst % src == 0 and a == b + (dst // src,)
    else:
        ok = src % dst == 0 and b == a + (src // dst,)
    if not ok:
        fail(inst, f"bitcast-convert of {src_type}{list(a)} to {dst_type}{list(b)}: the dimensions do not fit the "
                   "element widths (the narrower side needs a trailing dimension of the width ratio)")


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


@lowers("get-dimension-size")
def _get_dimension_size(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return "get-dimension-size", {"dimension": int(inst.attributes.dimensions[0])}


@lowers("domain")
def _domain(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    """A sharding-domain marker: the identity (its operand's value) on one NeuronCore."""
    return "opt-barrier", {}


@lowers("reduce-precision")
def _reduce_precision(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return "reduce-precision", {"exponent_bits": int(inst.attributes.exponent_bits),
                                "mantissa_bits": int(inst.attributes.mantissa_bits)}


# -- shape rules (XLA's; run by the verifier before lowering) ------------------------------
@shape_rule("broadcast")
def _broadcast_shapes(inst: Any) -> None:
    ops, out = shapes(inst)
    dims = list(inst.attributes.dimensions)
    if len(dims) != len(ops[0].dimensions) or any(
            not 0 <= d < out.rank or out.dimensions[d] != n for d, n in zip(dims, ops[0].dimensions)):
        fail(inst, f"broadcast dimensions {dims} do not map {ops[0]} into {out}")


@shape_rule("reshape", "bitcast")
def _reshape_shapes(inst: Any) -> None:
    ops, out = shapes(inst)
    if inst.opcode == "bitcast" and not ops[0].is_tuple and ops[0].element_type != out.element_type:
        size = [math.prod(shape_dims(s)) * bit_width(s.element_type) for s in (ops[0], out)]
        if size[0] != size[1]:
            fail(inst, f"bitcast from {ops[0]} to {out} changes the size in bytes")
    elif math.prod(shape_dims(ops[0])) != math.prod(shape_dims(out)):
        fail(inst, f"reshape from {ops[0]} to {out} changes the element count")


@shape_rule("transpose")
def _transpose_shapes(inst: Any) -> None:
    ops, out = shapes(inst)
    perm = list(inst.attributes.dimensions)
    if sorted(perm) != list(range(len(perm))) or len(perm) != ops[0].rank or \
            tuple(ops[0].dimensions[p] for p in perm) != shape_dims(out):
        fail(inst, f"transpose {perm} does not take {ops[0]} to {out}")


@shape_rule("slice")
def _slice_shapes(inst: Any) -> None:
    ops, out = shapes(inst)
    sd = inst.attributes.slice_dimensions
    want = tuple(max(0, -(-(s.limit - s.start) // (s.stride or 1))) for s in sd)
    if len(sd) != ops[0].rank or want != shape_dims(out):
        fail(inst, f"slice of {ops[0]} gives {list(want)}, the result is {out}")


@shape_rule("concatenate")
def _concatenate_shapes(inst: Any) -> None:
    ops, out = shapes(inst)
    if len(inst.attributes.dimensions) != 1 or not 0 <= int(inst.attributes.dimensions[0]) < out.rank or not ops:
        fail(inst, f"concatenate dimension {list(inst.attributes.dimensions)} is not one dimension of {out}")
    axis = int(inst.attributes.dimensions[0])
    total = sum(s.dimensions[axis] for s in ops)
    for s in ops:
        if s.rank != out.rank or any(a != b for k, (a, b) in enumerate(zip(s.dimensions, out.dimensions)) if k != axis):
            fail(inst, f"concatenate operand {s} does not fit {out}")
    if out.dimensions[axis] != total:
        fail(inst, f"concatenate along {axis} gives {total}, the result has {out.dimensions[axis]}")


@shape_rule("get-tuple-element")
def _get_tuple_element_shapes(inst: Any) -> None:
    ops, out = shapes(inst)
    k = inst.attributes.tuple_index
    if not ops[0].is_tuple or not 0 <= k < len(ops[0].tuple_shapes) or \
            shape_dims(ops[0].tuple_shapes[k]) != shape_dims(out):
        fail(inst, f"get-tuple-element {k} of {ops[0]} is not {out}")


@shape_rule("tuple")
def _tuple_shapes(inst: Any) -> None:
    ops, out = shapes(inst)
    if not out.is_tuple or len(out.tuple_shapes) != len(ops):
        fail(inst, f"tuple of {len(ops)} operands has shape {out}")


@shape_rule("pad")
def _pad_shapes(inst: Any) -> None:
    ops, out = shapes(inst)
    pc = inst.attributes.padding_config.dimensions
    if len(pc) != ops[0].rank or any(p.interior_padding < 0 for p in pc):
        fail(inst, f"padding config does not fit {ops[0]}")
    want = tuple(p.edge_padding_low + p.edge_padding_high + d + max(d - 1, 0) * p.interior_padding
                 for p, d in zip(pc, ops[0].dimensions))
    if want != shape_dims(out):
        fail(inst, f"pad of {ops[0]} gives {list(want)}, the result is {out}")


@shape_rule("dynamic-slice")
def _dynamic_slice_shapes(inst: Any) -> None:
    ops, out = shapes(inst)
    sizes = list(inst.attributes.dynamic_slice_sizes)
    if len(ops) != 1 + ops[0].rank or len(sizes) != ops[0].rank or \
            any(not 0 <= z <= d for z, d in zip(sizes, ops[0].dimensions)) or tuple(sizes) != shape_dims(out):
        fail(inst, f"dynamic-slice sizes {sizes} do not fit {ops[0]} -> {out}")


@shape_rule("dynamic-update-slice")
def _dynamic_update_slice_shapes(inst: Any) -> None:
    ops, out = shapes(inst)
    if len(ops) != 2 + ops[0].rank or ops[1].rank != ops[0].rank or \
            any(u > d for u, d in zip(ops[1].dimensions, ops[0].dimensions)) or shape_dims(out) != shape_dims(ops[0]):
        fail(inst, f"dynamic-update-slice of {ops[1]} into {ops[0]} does not fit")


@shape_rule("iota")
def _iota_shapes(inst: Any) -> None:
    out = inst.shape
    dims = list(inst.attributes.dimensions)
    if out.rank and (len(dims) != 1 or not 0 <= dims[0] < out.rank):
        fail(inst, f"iota dimension {dims} out of range for {out}")


@shape_rule("get-dimension-size")
def _get_dimension_size_shapes(inst: Any) -> None:
    (operand,), out = shapes(inst)
    dims = list(inst.attributes.dimensions)
    if len(dims) != 1 or not 0 <= dims[0] < operand.rank or operand.is_tuple:
        fail(inst, f"get-dimension-size dimension {dims} out of range for {operand}")
    if out.element_type != "S32" or out.rank:
        fail(inst, f"get-dimension-size gives s32[], not {out}")


@shape_rule("replica-id", "partition-id")
def _device_id_shapes(inst: Any) -> None:
    if inst.shape.element_type != "U32" or inst.shape.is_tuple or inst.shape.rank:
        fail(inst, f"{inst.opcode} gives u32[], not {inst.shape}")


shape_rule("domain")(same_as_operand)


@shape_rule("after-all")
def _after_all_shapes(inst: Any) -> None:
    ops, out = shapes(inst)
    if not out.is_token or any(not s.is_token for s in ops):
        fail(inst, f"after-all joins tokens into a token, not {[str(s) for s in ops]} -> {out}")


@shape_rule("add-dependency")
def _add_dependency_shapes(inst: Any) -> None:
    (value, _dependency), out = shapes(inst)
    if leaf_types(value) != leaf_types(out):
        fail(inst, f"add-dependency result {out} differs from its operand {value}")
