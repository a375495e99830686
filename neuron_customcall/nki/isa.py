"""``nki.isa`` (nisa): one function per NeuronCore instruction, traced into kernel IR through the
builder (``nc_matmul`` is implemented with the language's matmul in ``lang/tensor_ops.py``)."""

from __future__ import annotations

from emulator import machine
from emulator.kernel_ir import affine_to_json

from . import dtypes as nkd
from .errors import HardwareRuleError
from .indexing import Idx, Pred
from .lang.elementwise import binary_op, unary_op
from .lang.elementwise import reciprocal as _reciprocal, where as _where
from .lang.memory import copy as _copy, dropout as _dropout
from .lang.operands import activation_name, alu_op_name, as_shape, operand, scalar_value
from .lang.reductions import reduce
from .lang.tensor_ops import nc_matmul
from .tile import Tile
from .tracer import current


def _dt(dtype, default: str) -> str:
    return nkd.name_of(dtype) if dtype is not None else default


def activation(op, data, *, bias=None, scale=1.0, dtype=None, mask=None) -> Tile:
    """ScalarE: ``op(data * scale + bias)`` in fp32; bias a [P, 1] tile or scalar, scale a scalar
    or a [P, 1] tile."""
    return unary_op(activation_name(op), data, dtype, mask, scale=scale, bias=bias)


def tensor_tensor(data1, data2, op, *, dtype=None, mask=None) -> Tile:
    return binary_op(alu_op_name(op), data1, data2, dtype, mask)


def tensor_scalar(data, op0, operand0, reverse0: bool = False, op1=None, operand1=None,
                  reverse1: bool = False, *, dtype=None, mask=None) -> Tile:
    """VectorE: ``op1(op0(data, operand0), operand1)``; operands are scalars or [P, 1] tiles."""
    data = operand(data)
    srcs = [data, operand(operand0)]
    attrs = {"op0": alu_op_name(op0), "reverse0": bool(reverse0)}
    if op1 is not None:
        srcs.append(operand(operand1))
        attrs.update(op1=alu_op_name(op1), reverse1=bool(reverse1))
    return current().new("tensor_scalar", data.shape, _dt(dtype, data.dtype_name), *srcs,
                         mask=mask, **attrs)


def tensor_reduce(op, data, axis, *, negate: bool = False, keepdims: bool = False, dtype=None,
                  mask=None) -> Tile:
    return reduce(alu_op_name(op), data, axis, dtype, mask, keepdims, negate)


def scalar_tensor_tensor(*, data, op0, operand0, op1, operand1, dtype=None, mask=None) -> Tile:
    """``op1(op0(data, operand0), operand1)``: a scalar (or [P, 1]) step then a tile step."""
    first = tensor_scalar(data, op0, operand0)
    return binary_op(alu_op_name(op1), first, operand1, dtype, mask)


def max8(*, src, mask=None, dtype=None) -> Tile:
    """VectorE: the 8 largest values of each partition, descending, as a [P, 8] tile. The source
    may have up to 5 dimensions (all free axes are searched, 8 to 16384 elements per partition);
    values are compared in fp32 and the result has the source's dtype unless ``dtype`` is given."""
    data = operand(src)
    return current().new("max8", (data.shape[0], 8), _dt(dtype, data.dtype_name), data,
                         mask=mask)


def tensor_partition_reduce(op, data, *, dtype=None, mask=None) -> Tile:
    """Reduce across partitions: [P, F] -> [1, F]."""
    data = operand(data)
    return current().new("partition_reduce", (1,) + data.shape[1:], _dt(dtype, data.dtype_name),
                         data, mask=mask, op=alu_op_name(op))


def tensor_copy(src, *, dtype=None, mask=None, engine=None) -> Tile:
    return _copy(src, dtype=dtype, mask=mask)


def iota(expr, dtype=nkd.int32, *, mask=None) -> Tile:
    """Materialise an index expression (``arange``/``mgrid``/``program_id`` arithmetic)."""
    if not isinstance(expr, Idx):
        raise current().error("invalid iota", "iota takes an index expression")
    shape = expr.shape or (1,)
    return current().new("iota", shape, nkd.name_of(dtype), mask=mask,
                         expr=affine_to_json(expr.to_affine(len(shape))))


def memset(shape, value, dtype, *, mask=None) -> Tile:
    return current().new("memset", as_shape(shape), nkd.name_of(dtype), scalar_value(value),
                         mask=mask)


def nc_transpose(data, *, dtype=None, mask=None, engine=None) -> Tile:
    """Transpose a 2-D tile: TensorE (up to 128x128, result in PSUM) or VectorE (up to 32x32)."""
    data = operand(data)
    if data.ndim != 2:
        raise current().error("transpose shape", f"nc_transpose needs a 2-D tile, got "
                              f"{list(data.shape)}")
    vector = engine == "vector" or (engine is None and max(data.shape) <= 32)
    if vector and max(data.shape) > machine.VECTOR_ENGINE_TRANSPOSE_MAX:
        raise current().error("transpose size",
                              f"VectorE transpose of {list(data.shape)} exceeds 32x32",
                              HardwareRuleError)
    memory = machine.SBUF if vector else machine.PSUM
    return current().new("transpose", (data.shape[1], data.shape[0]),
                         _dt(dtype, data.dtype_name), data, memory=memory, mask=mask,
                         engine="vector" if vector else "tensor")


def affine_select(pred: Pred, on_true_tile, on_false_value, *, dtype=None, mask=None) -> Tile:
    """``on_true_tile`` where the affine predicate holds, else the scalar ``on_false_value``."""
    return _where(pred, on_true_tile, on_false_value, dtype=dtype, mask=mask)


def bn_stats(data, *, dtype=None, mask=None) -> Tile:
    """Per-partition statistics of a [P, F] tile for ``bn_aggr``: [P, 6] fp32."""
    data = operand(data)
    return current().new("bn_stats", (data.shape[0], 6), _dt(dtype, "float32"), data, mask=mask)


def bn_aggr(data, *, dtype=None, mask=None) -> Tile:
    """Mean and variance per partition ([P, 2]) from one or more concatenated bn_stats."""
    data = operand(data)
    return current().new("bn_aggr", (data.shape[0], 2), _dt(dtype, "float32"), data, mask=mask)


def tensor_tensor_scan(data0, data1, initial, op0, op1, *, dtype=None, mask=None) -> Tile:
    """``out[:, i] = op1(op0(out[:, i-1], data0[:, i]), data1[:, i])``, ``out[:, -1] = initial``."""
    d0, d1 = operand(data0), operand(data1)
    return current().new("tensor_tensor_scan", d0.shape,
                         _dt(dtype, nkd.promote(d0.dtype_name, d1.dtype_name)), d0, d1,
                         operand(initial), mask=mask, op0=alu_op_name(op0), op1=alu_op_name(op1))


def reciprocal(data, *, dtype=None, mask=None) -> Tile:
    return _reciprocal(data, dtype=dtype, mask=mask)


def dropout(data, prob, *, dtype=None, mask=None) -> Tile:
    """Zero each element with probability ``prob``."""
    return _dropout(data, prob, dtype=dtype, mask=mask)
