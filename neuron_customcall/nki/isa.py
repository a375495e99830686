"""``nki.isa`` (nisa): one function per NeuronCore instruction, traced into kernel IR."""

from __future__ import annotations

from emulator import machine
from emulator.kernel_ir import Const, affine_to_json

from . import checks
from . import dtypes as nkd
from . import language as nl
from .lang.elementwise import binary_op, unary_op
from .lang.operands import activation_name, new_tile, alu_op_name, operand, scalar_value, as_shape
from .lang.reductions import reduce
from .indexing import Idx, Pred
from .tile import Tile
from .tracer import current


def _dt(dtype, default: str) -> str:
    return nkd.name_of(dtype) if dtype is not None else default


def _src(x):
    v = operand(x)
    return v.access() if isinstance(v, Tile) else Const(v)


def nc_matmul(stationary: Tile, moving: Tile, *, is_transpose: bool = False, mask=None) -> Tile:
    """TensorE: ``stationary.T @ moving``; both in SBUF, contraction on the partition axis; result
    fp32 in PSUM.

    ``is_transpose=True`` is the PE array's transpose mode (what ``nc_transpose`` on TensorE is
    built from): ``moving`` must be the [K, K] identity in ``stationary``'s dtype, and the
    [M, K] result, ``stationary.T``, keeps that dtype (values pass through the array unrounded)
    instead of becoming fp32. The shape and dtype rules are checked while tracing, the identity
    when the kernel runs (it is data)."""
    tr = current()
    st, mv = operand(stationary), operand(moving)
    if not isinstance(st, Tile) or not isinstance(mv, Tile):
        raise tr.error("matmul operand", "nc_matmul takes two SBUF tiles")
    checks.check_matmul_operands(tr, st.access(), mv.access(), transpose=bool(is_transpose))
    dtype = st.dtype_name if is_transpose else "float32"
    attrs = {"transpose": True} if is_transpose else {}
    out = new_tile((st.shape[1], mv.shape[1]), dtype, machine.PSUM)
    tr.emit("matmul", out.access(), (st.access(), mv.access()), attrs, mask)
    return out


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
    srcs = [data.access(), _src(operand0)]
    attrs = {"op0": alu_op_name(op0), "reverse0": bool(reverse0)}
    if op1 is not None:
        srcs.append(_src(operand1))
        attrs.update(op1=alu_op_name(op1), reverse1=bool(reverse1))
    out = new_tile(data.shape, _dt(dtype, data.dtype_name))
    current().emit("tensor_scalar", out.access(), tuple(srcs), attrs, mask)
    return out


def tensor_reduce(op, data, axis, *, negate: bool = False, keepdims: bool = False, dtype=None,
                  mask=None) -> Tile:
    return reduce(alu_op_name(op), data, axis, dtype, mask, keepdims, negate)


def scalar_tensor_tensor(*, data, op0, operand0, op1, operand1, dtype=None, mask=None) -> Tile:
    """``op1(op0(data, operand0), operand1)``: a scalar (or [P, 1]) step then a tile step."""
    first = tensor_scalar(data, op0, operand0)
    return binary_op(alu_op_name(op1), first, operand1, dtype, mask)


def tensor_partition_reduce(op, data, *, dtype=None, mask=None) -> Tile:
    """Reduce across partitions: [P, F] -> [1, F]."""
    data = operand(data)
    out = new_tile((1,) + data.shape[1:], _dt(dtype, data.dtype_name))
    current().emit("partition_reduce", out.access(), (data.access(),), {"op": alu_op_name(op)}, mask)
    return out


def tensor_copy(src, *, dtype=None, mask=None, engine=None) -> Tile:
    return nl.copy(src, dtype=dtype, mask=mask)


def iota(expr, dtype=nkd.int32, *, mask=None) -> Tile:
    """Materialise an index expression (``arange``/``mgrid``/``program_id`` arithmetic)."""
    if not isinstance(expr, Idx):
        raise current().error("invalid iota", "iota takes an index expression")
    out = new_tile(expr.shape or (1,), nkd.name_of(dtype))
    current().emit("iota", out.access(), (),
                   {"expr": affine_to_json(expr.to_affine(len(out.shape)))}, mask)
    return out


def memset(shape, value, dtype, *, mask=None) -> Tile:
    out = new_tile(as_shape(shape), nkd.name_of(dtype))
    current().emit("memset", out.access(), (Const(scalar_value(value)),), {}, mask)
    return out


def nc_transpose(data, *, dtype=None, mask=None, engine=None) -> Tile:
    """Transpose a 2-D tile: TensorE (up to 128x128, result in PSUM) or VectorE (up to 32x32)."""
    data = operand(data)
    if data.ndim != 2:
        raise current().error("transpose shape", f"nc_transpose needs a 2-D tile, got "
                              f"{list(data.shape)}")
    vector = engine == "vector" or (engine is None and max(data.shape) <= 32)
    if vector and max(data.shape) > machine.VECTOR_ENGINE_TRANSPOSE_MAX:
        from .errors import HardwareRuleError
        raise current().error("transpose size",
                              f"VectorE transpose of {list(data.shape)} exceeds 32x32",
                              HardwareRuleError)
    memory = machine.SBUF if vector else machine.PSUM
    out = new_tile((data.shape[1], data.shape[0]), _dt(dtype, data.dtype_name), memory)
    current().emit("transpose", out.access(), (data.access(),), {"engine": "vector" if vector
                                                                  else "tensor"}, mask)
    return out


def affine_select(pred: Pred, on_true_tile, on_false_value, *, dtype=None, mask=None) -> Tile:
    """``on_true_tile`` where the affine predicate holds, else the scalar ``on_false_value``."""
    return nl.where(pred, on_true_tile, on_false_value, dtype=dtype, mask=mask)


def bn_stats(data, *, dtype=None, mask=None) -> Tile:
    """Per-partition statistics of a [P, F] tile for ``bn_aggr``: [P, 6] fp32."""
    data = operand(data)
    out = new_tile((data.shape[0], 6), _dt(dtype, "float32"))
    current().emit("bn_stats", out.access(), (data.access(),), {}, mask)
    return out


def bn_aggr(data, *, dtype=None, mask=None) -> Tile:
    """Mean and variance per partition ([P, 2]) from one or more concatenated bn_stats."""
    data = operand(data)
    out = new_tile((data.shape[0], 2), _dt(dtype, "float32"))
    current().emit("bn_aggr", out.access(), (data.access(),), {}, mask)
    return out


def tensor_tensor_scan(data0, data1, initial, op0, op1, *, dtype=None, mask=None) -> Tile:
    """``out[:, i] = op1(op0(out[:, i-1], data0[:, i]), data1[:, i])``, ``out[:, -1] = initial``."""
    d0, d1 = operand(data0), operand(data1)
    out = new_tile(d0.shape, _dt(dtype, nkd.promote(d0.dtype_name, d1.dtype_name)))
    current().emit("tensor_tensor_scan", out.access(), (d0.access(), d1.access(), _src(initial)),
                   {"op0": alu_op_name(op0), "op1": alu_op_name(op1)}, mask)
    return out


def reciprocal(data, *, dtype=None, mask=None) -> Tile:
    return nl.reciprocal(data, dtype=dtype, mask=mask)



def dropout(data, prob, *, dtype=None, mask=None) -> Tile:
    """Zero each element with probability ``prob``."""
    return nl.dropout(data, prob, dtype=dtype, mask=mask)
