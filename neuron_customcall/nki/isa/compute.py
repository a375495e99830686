"""Emitters of the compute instructions (ScalarE activation, VectorE ALU ops, reductions,
statistics, scans, max8 and its companions): one definition each, ``dst`` first (emit.py)."""

from __future__ import annotations

import numpy as np

from emulator import machine
from emulator.kernel_ir import ops

from .. import dtypes as nkd
from ..builder import mask_fits
from ..indexing import Pred
from ..lang.elementwise import unary_dtype
from ..lang.memory import expand_dims
from ..lang.operands import activation_name, operand
from ..lang.reductions import _axes as reduction_axes
from ..tile import Tile
from ..tracer import current
from .emit import alu, dtype_name, fail, free_size, result, tile, tile_or_scalar

def is_prelu(op) -> bool:
    """Whether ``op`` is PReLU (``nl.prelu`` or its name), the one parameterised activation."""
    return (getattr(op, "_nki_act", None) or op) == "prelu"


def activation(dst, op, data, *, bias=None, scale=1.0, dtype=None, mask=None,
               api="nki.isa.activation") -> Tile:
    """ScalarE ``op(data * scale + bias)`` in fp32; ``bias`` a scalar or a [P, 1] tile, ``scale``
    a scalar or a [P, 1] tile (broadcast along the free axes). ``nl.prelu`` here has no
    ``relu_param`` to read (only ``activate2`` takes one) and runs with its default slope 0.0,
    which is ReLU."""
    func = "relu" if is_prelu(op) else activation_name(op)
    x = tile(data, "data", api)
    out = unary_dtype(func, x.dtype_name, dtype)
    srcs = [x, 0.0 if bias is None else _per_partition(bias, x, "bias", api)]
    s = _per_partition(scale, x, "scale", api)
    if isinstance(s, Tile):
        srcs.append(s)
        s = 1.0
    return result(dst, "activation", x.shape, out, *srcs, api=api, mask=mask, func=func,
                  scale=float(s))


def _per_partition(v, x: Tile, what: str, api: str):
    """A scalar, or a tile of one element per partition of ``x`` ([P, 1] or [P])."""
    v = tile_or_scalar(v, what, api)
    if isinstance(v, Tile):
        if v.shape[0] != x.shape[0] or free_size(v.shape) != 1:
            raise fail(f"{what} shape", f"{api}: {what} must be a scalar or a per-partition "
                       f"vector [{x.shape[0]}, 1] (one value per partition), got {list(v.shape)}")
        if v.ndim == 1:
            v = _column(v)
    return v


def _column(v: Tile) -> Tile:
    """A [P] tile as its [P, 1] view (the same elements)."""
    return expand_dims(v, 1)


def tensor_tensor(dst, data1, data2, op, *, dtype=None, mask=None,
                  api="nki.isa.tensor_tensor") -> Tile:
    """VectorE/GpSimd ``op(data1, data2)`` element-wise on two tiles of the same shape."""
    a, b = tile(data1, "data1", api), tile(data2, "data2", api)
    name = alu(op, api)
    if name in ops.COMPARISON_OPS:
        default = "bool"
    else:
        default = nkd.promote(a.dtype_name, b.dtype_name)
        if name == "divide" and not nkd.is_float(default):
            default = "float32"
    shape = _broadcast(a.shape, b.shape, api)
    return result(dst, "tensor_tensor", shape, dtype_name(dtype, default), a, b, api=api,
                  mask=mask, op=name)


def _broadcast(a, b, api):
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        raise fail("shape mismatch", f"{api}: tiles {list(a)} and {list(b)} do not match") from None


def tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None,
                  reverse1=False, *, dtype=None, mask=None, api="nki.isa.tensor_scalar") -> Tile:
    """``op1(op0(data, operand0), operand1)``; operands are scalars or [P, 1] tiles; ``reverseN``
    swaps opN's operands."""
    x = tile(data, "data", api)
    srcs = [x, _per_partition(operand0, x, "operand0", api)]
    attrs = {"op0": alu(op0, api), "reverse0": bool(reverse0)}
    if op1 is not None:
        srcs.append(_per_partition(operand1, x, "operand1", api))
        attrs.update(op1=alu(op1, api), reverse1=bool(reverse1))
    return result(dst, "tensor_scalar", x.shape, dtype_name(dtype, x.dtype_name), *srcs,
                  api=api, mask=mask, **attrs)


def scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False,
                         *, dtype=None, mask=None, api="nki.isa.scalar_tensor_tensor") -> Tile:
    """``op1(op0(data, operand0), operand1)``: a scalar (or [P, 1]) step, then a tile step;
    ``reverseN`` swaps opN's operands."""
    x = tile(data, "data", api)
    other = tile(operand1, "operand1", api)
    first = tensor_scalar(None, x, op0, operand0, reverse0, dtype="float32", mask=mask, api=api)
    a, b = (other, first) if reverse1 else (first, other)
    return tensor_tensor(dst, a, b, op1, dtype=dtype_name(dtype, x.dtype_name), mask=mask,
                         api=api)


def reciprocal(dst, data, *, dtype=None, mask=None, api="nki.isa.reciprocal") -> Tile:
    x = tile(data, "data", api)
    out = x.dtype_name if nkd.is_float(x.dtype_name) else "float32"
    return activation(dst, "reciprocal", x, dtype=dtype_name(dtype, out), mask=mask, api=api)


def tensor_reduce(dst, op, data, axis, *, negate=False, keepdims=False, dtype=None, mask=None,
                  api="nki.isa.tensor_reduce") -> Tile:
    """Reduce the trailing free axes ``axis`` of ``data`` with ``op`` (negated on request)."""
    x = tile(data, "data", api)
    name = alu(op, api)
    axes = reduction_axes(axis, x.ndim)
    shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape)
                  if keepdims or i not in axes)
    default = "bool" if name in ("logical_and", "logical_or") else x.dtype_name
    return result(dst, "tensor_reduce", shape, dtype_name(dtype, default), x, api=api,
                  mask=mask, op=name, axes=list(axes), keepdims=bool(keepdims),
                  negate=bool(negate))


def reduce_free(op: str, x: Tile, api: str) -> Tile:
    """``op`` over all free axes of ``x`` into a new fp32 [P, 1] tile."""
    if x.ndim == 1:
        x = _column(x)
    return tensor_reduce(None, op, x, tuple(range(1, x.ndim)), keepdims=True, dtype="float32",
                         api=api)


def tensor_partition_reduce(dst, op, data, *, dtype=None, mask=None,
                            api="nki.isa.tensor_partition_reduce") -> Tile:
    """Reduce across partitions: [P, ...] -> [1, ...]."""
    x = tile(data, "data", api)
    return result(dst, "partition_reduce", (1,) + x.shape[1:], dtype_name(dtype, x.dtype_name),
                  x, api=api, mask=mask, op=alu(op, api))


def bn_stats(dst, data, *, dtype=None, mask=None, api="nki.isa.bn_stats") -> Tile:
    """Per-partition statistics of a [P, F] tile for ``bn_aggr``: [P, 6]."""
    x = tile(data, "data", api)
    return result(dst, "bn_stats", (x.shape[0], 6), dtype_name(dtype, "float32"), x, api=api,
                  mask=mask)


def bn_aggr(dst, data, *, dtype=None, mask=None, api="nki.isa.bn_aggr") -> Tile:
    """Mean and variance per partition ([P, 2]) from one or more concatenated bn_stats."""
    x = tile(data, "data", api)
    if free_size(x.shape) % 6:
        raise fail("bn_aggr shape", f"{api}: data holds groups of 6 bn_stats values per "
                   f"partition; {list(x.shape)} does not")
    return result(dst, "bn_aggr", (x.shape[0], 2), dtype_name(dtype, "float32"), x, api=api,
                  mask=mask)


def tensor_tensor_scan(dst, data0, data1, initial, op0, op1, reverse0=False, reverse1=False, *,
                       dtype=None, mask=None, api="nki.isa.tensor_tensor_scan") -> Tile:
    """``out[:, i] = op1(op0(data0[:, i], out[:, i-1]), data1[:, i])`` from ``initial``."""
    d0, d1 = tile(data0, "data0", api), tile(data1, "data1", api)
    if d0.shape != d1.shape:
        raise fail("scan shape", f"{api}: data0 {list(d0.shape)} and data1 {list(d1.shape)} "
                   "must have the same shape")
    init = _per_partition(initial, d0, "initial", api)
    out = dtype_name(dtype, nkd.promote(d0.dtype_name, d1.dtype_name))
    return result(dst, "tensor_tensor_scan", d0.shape, out, d0, d1, init, api=api, mask=mask,
                  op0=alu(op0, api), op1=alu(op1, api), reverse0=bool(reverse0),
                  reverse1=bool(reverse1))


def max8(dst, src, *, dtype=None, mask=None, api="nki.isa.max8") -> Tile:
    """The 8 largest values of each partition, descending: [P, ...] -> [P, 8]."""
    x = tile(src, "src", api)
    out_dtype = dtype_name(dtype, x.dtype_name)
    x, mask = source_mask(x, mask, (x.shape[0], 8), float("-inf"), api)
    return result(dst, "max8", (x.shape[0], 8), out_dtype, x, api=api, mask=mask)


def nc_find_index8(dst, data, vals, *, dtype=None, mask=None, reverse=False,
                   api="nki.isa.nc_find_index8") -> Tile:
    """Per partition, the index (uint32; all ones if absent) of the first element of ``data``
    equal to each of the 8 values in ``vals``; a repeated value takes the next occurrence.
    ``reverse`` claims occurrences from ``vals[7]`` down (``nc_match_replace8``'s ``dst_idx``)."""
    x, v = tile(data, "data", api), tile(vals, "vals", api)
    if free_size(v.shape) != 8 or v.shape[0] != x.shape[0]:
        raise fail("nc_find_index8 vals", f"{api}: vals must hold 8 values per partition of "
                   f"data ({x.shape[0]} partitions), got {list(v.shape)}")
    _check_eight(x, api)
    x, mask = source_mask(x, mask, (x.shape[0], 8), float("nan"), api)
    return result(dst, "find_index8", (x.shape[0], 8), dtype_name(dtype, "uint32"), x, v,
                  api=api, mask=mask, reverse=bool(reverse))


def nc_match_replace8(dst, data, vals, imm, *, dtype=None, mask=None,
                      api="nki.isa.nc_match_replace8") -> Tile:
    """``data`` with the first occurrence (per partition) of each of the 8 ``vals`` replaced by
    ``imm``."""
    x, v = tile(data, "data", api), tile(vals, "vals", api)
    if free_size(v.shape) != 8 or v.shape[0] != x.shape[0]:
        raise fail("nc_match_replace8 vals", f"{api}: vals must hold 8 values per partition of "
                   f"data ({x.shape[0]} partitions), got {list(v.shape)}")
    _check_eight(x, api)
    imm = operand(imm)
    if isinstance(imm, Tile):
        raise fail("nc_match_replace8 imm", f"{api}: imm is a scalar constant")
    out_dtype = dtype_name(dtype, x.dtype_name)
    # Only the masked elements are searched (a value outside the mask is never claimed); the
    # result is written where the mask holds.
    x, _ = source_mask(x, mask, (), float("nan"), api)
    return result(dst, "match_replace8", x.shape, out_dtype, x, v, api=api, mask=mask,
                  imm=float(imm))


def source_mask(x: Tile, mask, result_shape: tuple[int, ...], fill: float, api: str
                ) -> tuple[Tile, Pred | None]:
    """A mask written over the source of an instruction whose result is smaller (``max8``,
    ``nc_find_index8``: ``mask=(ix < n // 2 and iy < m // 2)`` over ``data[ix, iy]``, as AWS's
    examples write it): the source as an fp32 copy with ``fill`` where the mask fails (minus
    infinity takes no part in a maximum, NaN equals nothing), and the mask's conditions on the
    partition axis alone as the result's mask (those partitions are not written). A mask that
    already fits the result (``result_shape``; ``()``: always copy) is returned unchanged."""
    if not isinstance(mask, Pred) or not mask.exprs or (
            result_shape and mask_fits(mask.shape, result_shape)):
        return x, mask
    if not mask_fits(mask.shape, tuple(x.shape)):
        return x, mask  # the builder names the mismatch
    if not nkd.is_float(x.dtype_name):
        raise fail("source mask", f"{api}: a mask over the elements of an integer source "
                   f"({x.dtype_name}) is not supported; mask the result's partitions instead")
    tr = current()
    copy = tr.new("memset", tuple(x.shape), "float32", fill)
    tr.emit("tensor_copy", copy, x, mask=mask)
    rank = len(x.shape)
    part = [e for e in mask.exprs
            if all(n == 1 for n in ((1,) * (rank - len(e.shape)) + tuple(e.shape))[1:])]
    return copy, (Pred(part) if part else None)


def _check_eight(x: Tile, api: str) -> None:
    free = free_size(x.shape)
    if not machine.MAX8_MIN_FREE <= free <= machine.MAX8_MAX_FREE:
        raise fail("free size", f"{api}: data has {free} elements per partition; the instruction "
                   f"takes {machine.MAX8_MIN_FREE} to {machine.MAX8_MAX_FREE}")
