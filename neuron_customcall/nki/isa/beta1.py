"""``neuronxcc.nki.isa`` (NKI beta 1): instructions return new tiles; ``mask=`` and ``dtype=``
keywords. Each function is its instruction's one emitter called with ``dst=None`` (or, where
beta 1 itself writes into a ``dst=``, with it); only the signatures are beta 1's own."""

from __future__ import annotations

from .. import dtypes as nkd
from ..tile import Tile
from . import accumulate as _acc
from . import compute as _c
from . import enums as _enums
from . import gather as _g
from . import matmul as _mm
from . import movement as _mv
from .emit import fail
from .enums import fp32
from .enums import dge_mode_v1 as dge_mode
from .enums import dma_engine
from .enums import engine_v1 as engine
from .enums import nc_version_v1 as nc_version
from .enums import oob_mode_v1 as oob_mode
from .enums import reduce_cmd_v1 as reduce_cmd
from .refused import WHY, refusal

tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown


def get_nc_version() -> nc_version:
    """The emulated target's NeuronCore version (gen2, the machine model's NeuronCore-v2)."""
    return _enums.get_nc_version(nc_version)


def activation(op, data, *, bias=None, scale=1.0, reduce_op=None, reduce_res=None,
               reduce_cmd=reduce_cmd.idle, mask=None, dtype=None, name=None) -> Tile:
    return _acc.activation_reduce(None, op, data, bias=bias, scale=scale, reduce_op=reduce_op,
                                  reduce_res=reduce_res, reduce_cmd=reduce_cmd, dtype=dtype,
                                  mask=mask)


def activation_reduce(op, data, *, reduce_op, reduce_res, bias=None, scale=1.0, mask=None,
                      dtype=None, name=None) -> Tile:
    return _acc.activation_reduce(None, op, data, bias=bias, scale=scale, reduce_op=reduce_op,
                                  reduce_res=reduce_res, reduce_cmd="reset_reduce", dtype=dtype,
                                  mask=mask, api="nki.isa.activation_reduce")


def affine_select(pred, on_true_tile, on_false_value, *, mask=None, dtype=None, name=None) -> Tile:
    return _mv.affine_select_pred(None, pred, on_true_tile, on_false_value, dtype=dtype,
                                  mask=mask)


def bn_aggr(data, *, mask=None, dtype=None, name=None) -> Tile:
    return _c.bn_aggr(None, data, dtype=dtype, mask=mask)


def bn_stats(data, *, mask=None, dtype=None, name=None) -> Tile:
    return _c.bn_stats(None, data, dtype=dtype, mask=mask)


def dma_copy(*, dst, src, mask=None, dst_rmw_op=None, oob_mode=oob_mode.error,
             dge_mode=dge_mode.unknown, name=None) -> None:
    _mv.dma_copy(dst, src, dst_rmw_op=dst_rmw_op, oob_mode=oob_mode, dge_mode=dge_mode,
                 mask=mask)


def dma_transpose(src, *, axes=None, dge_mode=dge_mode.unknown, mask=None, dtype=None,
                  name=None) -> Tile:
    return _mv.dma_transpose(None, src, axes, dge_mode=dge_mode, dtype=dtype, mask=mask)


def dropout(data, prob, *, mask=None, dtype=None, name=None) -> Tile:
    return _mv.dropout(None, data, prob, dtype=dtype, mask=mask)


def iota(expr, dtype=nkd.int32, *, mask=None, name=None) -> Tile:
    return _mv.iota_expr(expr, dtype, mask=mask)


def max8(*, src, mask=None, dtype=None, name=None) -> Tile:
    return _c.max8(None, src, dtype=dtype, mask=mask)


def memset(shape, value, dtype, *, mask=None, engine=engine.unknown, name=None) -> Tile:
    return _mv.memset(None, value, shape=shape, dtype=dtype, engine=engine, mask=mask)


def nc_find_index8(*, data, vals, mask=None, dtype=None, name=None) -> Tile:
    return _c.nc_find_index8(None, data, vals, dtype=dtype, mask=mask)


def nc_match_replace8(*, data, vals, imm, dst_idx=None, mask=None, dtype=None, name=None) -> Tile:
    if dst_idx is not None:
        _c.nc_find_index8(dst_idx, data, vals, reverse=True, mask=mask,
                          api="nki.isa.nc_match_replace8")
    return _c.nc_match_replace8(None, data, vals, imm, dtype=dtype, mask=mask)


#: neuronxcc's perf_mode strings: "double_row_gen3" is the FP8 double-row mode of NeuronCore-v3
#: (beta 2's matmul_perf_mode.double_row).
_PERF_MODES_V1 = {"double_row_gen3": "double_row"}


def nc_matmul(stationary, moving, *, is_stationary_onezero=False, is_moving_onezero=False,
              is_transpose=False, tile_position=(), tile_size=(), perf_mode=None, mask=None,
              name=None) -> Tile:
    if isinstance(perf_mode, str):
        perf_mode = _PERF_MODES_V1.get(perf_mode, perf_mode)
    return _mm.nc_matmul(None, stationary, moving, is_transpose=is_transpose,
                         tile_position=tile_position, tile_size=tile_size, perf_mode=perf_mode,
                         mask=mask)


def nc_transpose(data, *, mask=None, dtype=None, engine=engine.unknown, name=None) -> Tile:
    return _mv.nc_transpose(None, data, engine=engine, dtype=dtype, mask=mask)


def range_select(*, on_true_tile, comp_op0, comp_op1, bound0, bound1,
                 reduce_cmd=reduce_cmd.idle, reduce_res=None, reduce_op="maximum", range_start=0,
                 on_false_value=fp32.min, mask=None, dtype=None, name=None) -> Tile:
    return _acc.range_select(None, on_true_tile, comp_op0, comp_op1, bound0, bound1,
                             reduce_cmd=reduce_cmd, reduce_res=reduce_res, reduce_op=reduce_op,
                             range_start=range_start, on_false_value=on_false_value,
                             dtype=dtype, mask=mask)


def reciprocal(data, *, dtype=None, mask=None, name=None) -> Tile:
    return _c.reciprocal(None, data, dtype=dtype, mask=mask)


def scalar_tensor_tensor(*, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False,
                         dtype=None, mask=None, name=None) -> Tile:
    return _c.scalar_tensor_tensor(None, data, op0, operand0, op1, operand1, reverse0, reverse1,
                                   dtype=dtype, mask=mask)


def select_reduce(*, dst, predicate, on_true, on_false, reduce_res=None,
                  reduce_cmd=reduce_cmd.idle, reduce_op="maximum", reverse_pred=False, mask=None,
                  dtype=None, name=None) -> Tile:
    return _acc.select_reduce(dst, predicate, on_true, on_false, reduce_res, reduce_cmd,
                              reduce_op, reverse_pred, dtype=dtype, mask=mask)


def tensor_copy(src, *, mask=None, dtype=None, engine=engine.unknown, name=None) -> Tile:
    return _mv.tensor_copy(None, src, engine=engine, dtype=dtype, mask=mask)


def tensor_copy_predicated(*, src, dst, predicate, reverse_pred=False, mask=None, dtype=None,
                           name=None) -> Tile:
    return _mv.tensor_copy_predicated(dst, src, predicate, reverse_pred, mask=mask)


def tensor_partition_reduce(op, data, *, mask=None, dtype=None, name=None) -> Tile:
    return _c.tensor_partition_reduce(None, op, data, dtype=dtype, mask=mask)


def tensor_reduce(op, data, axis, *, mask=None, dtype=None, negate=False, keepdims=False,
                  name=None) -> Tile:
    return _c.tensor_reduce(None, op, data, axis, negate=negate, keepdims=keepdims, dtype=dtype,
                            mask=mask)


def tensor_scalar(data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False,
                  *, dtype=None, mask=None, engine=engine.unknown, name=None) -> Tile:
    return _c.tensor_scalar(None, data, op0, operand0, reverse0, op1, operand1, reverse1,
                            dtype=dtype, mask=mask)


def tensor_scalar_reduce(*, data, op0, operand0, reduce_op, reduce_res, reverse0=False,
                         dtype=None, mask=None, name=None) -> Tile:
    return _acc.tensor_scalar_reduce(None, data, op0, operand0, reduce_op, reduce_res, reverse0,
                                     dtype=dtype, mask=mask)


def tensor_tensor(data1, data2, op, *, dtype=None, mask=None, engine=engine.unknown,
                  name=None) -> Tile:
    return _c.tensor_tensor(None, data1, data2, op, dtype=dtype, mask=mask)


def tensor_scalar_cumulative(*, dst, src, op0, op1, imm0, imm1=None,
                             reduce_cmd=reduce_cmd.reset_reduce, name=None) -> Tile:
    """Beta 1 writes this instruction's running values into ``dst`` (given by keyword, as in
    AWS's examples) and returns it."""
    return _acc.tensor_scalar_cumulative(dst, src, op0, op1, imm0, imm1, reduce_cmd)


def tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0=False, reverse1=False, *,
                       dtype=None, mask=None, name=None) -> Tile:
    return _c.tensor_tensor_scan(None, data0, data1, initial, op0, op1, reverse0, reverse1,
                                 dtype=dtype, mask=mask)


def local_gather(src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, *, mask=None,
                 name=None) -> Tile:
    if mask is not None:
        raise fail("local_gather mask", "nki.isa.local_gather: mask is not supported")
    return _g.local_gather(None, src_buffer, index, num_elem_per_idx, num_valid_indices)


def nc_stream_shuffle(src, dst, shuffle_mask, *, dtype=None, mask=None, name=None) -> Tile:
    return _g.nc_stream_shuffle(dst, src, shuffle_mask)


def sequence_bounds(*, segment_ids, dtype=None, name=None) -> Tile:
    return _g.sequence_bounds(None, segment_ids, dtype=dtype)


builtin_custom_op = refusal("nki.isa.builtin_custom_op", WHY["builtin_custom_op"])


def tensor_copy_dynamic_src(src, *, mask=None, dtype=None, engine=engine.unknown,
                            name=None) -> Tile:
    return _mv.tensor_copy_dynamic_src(src, dtype=dtype, mask=mask, engine=engine)


def tensor_copy_dynamic_dst(*, dst, src, mask=None, dtype=None, engine=engine.unknown,
                            name=None) -> Tile:
    return _mv.tensor_copy_dynamic_dst(dst, src, dtype=dtype, mask=mask, engine=engine)

__all__ = [
    "activation", "activation_reduce", "affine_select", "bn_aggr", "bn_stats",
    "builtin_custom_op", "dge_mode", "dma_copy", "dma_engine", "dma_transpose", "dropout", "engine", "fp32",
    "get_nc_version", "gpsimd_engine", "iota", "local_gather", "max8", "memset", "nc_find_index8",
    "nc_match_replace8", "nc_matmul", "nc_stream_shuffle", "nc_transpose", "nc_version",
    "oob_mode", "range_select", "reciprocal", "reduce_cmd", "scalar_engine",
    "scalar_tensor_tensor", "select_reduce", "sequence_bounds", "tensor_copy",
    "tensor_copy_dynamic_dst", "tensor_copy_dynamic_src", "tensor_copy_predicated",
    "tensor_engine", "tensor_partition_reduce", "tensor_reduce", "tensor_scalar",
    "tensor_scalar_cumulative", "tensor_scalar_reduce", "tensor_tensor", "tensor_tensor_scan", "unknown_engine",
    "vector_engine",
]
