"""``nki.isa`` (NKI beta 2): every instruction takes its destination ``dst`` first and writes
into it; it returns an ``NkiInstruction`` handle. Each function is its instruction's one emitter
called with the kernel's ``dst``; only the signatures are beta 2's own."""

from __future__ import annotations

from ..errors import NkiValidationError
from ..lang.elementwise import equal, maximum
from . import accumulate as _acc
from . import compute as _c
from . import cores as _cores
from . import gather as _g
from . import enums as _enums
from . import matmul as _mm
from . import movement as _mv
from . import mx as _mx
from . import random_state as _rs
from .emit import fail
from .cores import VirtualRegister, register_alloc
from .enums import (dge_mode, dma_engine, engine, gpsimd_engine, matmul_perf_mode, nc_version,
                    oob_mode, reduce_cmd, scalar_engine, tensor_engine, unknown_engine,
                    vector_engine)


class NkiInstruction:
    """The handle an ``nki.isa`` call returns. ``depends_on(*producers)`` orders this instruction
    after the producers: the emulator runs instructions in program order, and a producer's handle
    only exists once it was emitted, so the order already holds; the call checks its arguments."""

    def __init__(self, api: str, written=None):
        self.api = api
        self.written = written

    def depends_on(self, *producers: "NkiInstruction") -> "NkiInstruction":
        for p in producers:
            if not isinstance(p, NkiInstruction):
                raise fail("depends_on", f"{self.api}.depends_on takes NkiInstruction handles, "
                           f"got {type(p).__name__}")
        return self

    def __repr__(self) -> str:
        return f"NkiInstruction({self.api})"


def _done(api: str, written=None) -> NkiInstruction:
    return NkiInstruction(f"nki.isa.{api}", written)


def get_nc_version() -> nc_version:
    """The emulated target's NeuronCore version (gen2, the machine model's NeuronCore-v2)."""
    return _enums.get_nc_version(nc_version)


get_nc_sub_version = _enums.get_nc_sub_version


def dma_copy(dst, src, priority=None, oob_mode=oob_mode.error, dge_mode=dge_mode.unknown,
             engine=engine.unknown, name=None) -> NkiInstruction:
    _mv.dma_copy(dst, src, oob_mode=oob_mode, dge_mode=dge_mode, engine=engine)
    return _done("dma_copy", dst)


def tensor_copy(dst, src, engine=engine.unknown, name=None) -> NkiInstruction:
    return _done("tensor_copy", _mv.tensor_copy(dst, src, engine=engine))


def memset(dst, value, engine=engine.unknown, name=None) -> NkiInstruction:
    return _done("memset", _mv.memset(dst, value, engine=engine))


def tensor_copy_predicated(dst, src, predicate, reverse_pred=False, name=None) -> NkiInstruction:
    return _done("tensor_copy_predicated",
                 _mv.tensor_copy_predicated(dst, src, predicate, reverse_pred))


def nc_matmul(dst, stationary, moving, is_stationary_onezero=False, is_moving_onezero=False,
              is_transpose=False, accumulate=None, tile_position=(), tile_size=(),
              perf_mode=matmul_perf_mode.none, name=None) -> NkiInstruction:
    return _done("nc_matmul", _mm.nc_matmul(
        dst, stationary, moving, is_transpose=is_transpose, accumulate=accumulate,
        tile_position=tile_position, tile_size=tile_size, perf_mode=perf_mode))


def nc_transpose(dst, data, engine=engine.unknown, name=None) -> NkiInstruction:
    return _done("nc_transpose", _mv.nc_transpose(dst, data, engine=engine))


def dma_transpose(dst, src, axes=None, priority=None, dge_mode=dge_mode.unknown,
                  oob_mode=oob_mode.error, name=None) -> NkiInstruction:
    return _done("dma_transpose", _mv.dma_transpose(dst, src, axes, dge_mode=dge_mode))


def tensor_tensor(dst, data1, data2, op, engine=engine.unknown, name=None) -> NkiInstruction:
    return _done("tensor_tensor", _c.tensor_tensor(dst, data1, data2, op))


def tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None,
                  reverse1=False, engine=engine.unknown, name=None) -> NkiInstruction:
    return _done("tensor_scalar", _c.tensor_scalar(dst, data, op0, operand0, reverse0, op1,
                                                   operand1, reverse1))


def tensor_reduce(dst, op, data, axis, negate=False, keepdims=False, name=None) -> NkiInstruction:
    return _done("tensor_reduce", _c.tensor_reduce(dst, op, data, axis, negate=negate,
                                                   keepdims=keepdims))


def tensor_partition_reduce(dst, op, data, name=None) -> NkiInstruction:
    return _done("tensor_partition_reduce", _c.tensor_partition_reduce(dst, op, data))


def activation(dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None,
               reduce_cmd=reduce_cmd.idle, name=None) -> NkiInstruction:
    return _done("activation", _acc.activation_reduce(
        dst, op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
        reduce_cmd=reduce_cmd))


def activation_reduce(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0,
                      name=None) -> NkiInstruction:
    return _done("activation_reduce", _acc.activation_reduce(
        dst, op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
        reduce_cmd="reset_reduce", api="nki.isa.activation_reduce"))


def iota(dst, pattern, offset=0, channel_multiplier=0, name=None) -> NkiInstruction:
    return _done("iota", _mv.iota_pattern(dst, pattern, offset, channel_multiplier))


def affine_select(dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op=equal,
                  offset=0, name=None) -> NkiInstruction:
    return _done("affine_select", _mv.affine_select_pattern(
        dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op, offset))


def bn_stats(dst, data, name=None) -> NkiInstruction:
    return _done("bn_stats", _c.bn_stats(dst, data))


def bn_aggr(dst, data, name=None) -> NkiInstruction:
    return _done("bn_aggr", _c.bn_aggr(dst, data))


def tensor_tensor_scan(dst, data0, data1, initial, op0, op1, reverse0=False, reverse1=False,
                       name=None) -> NkiInstruction:
    return _done("tensor_tensor_scan", _c.tensor_tensor_scan(dst, data0, data1, initial, op0, op1,
                                                             reverse0, reverse1))


def rng(dst, engine=engine.vector, name=None) -> NkiInstruction:
    return _done("rng", _mv.rng(dst, engine=engine))


def dropout(dst, data, prob, name=None) -> NkiInstruction:
    return _done("dropout", _mv.dropout(dst, data, prob))


def rand2(dst, min, max, name=None) -> NkiInstruction:  # noqa: A002  (the reference's names)
    return _done("rand2", _mv.rand2(dst, min, max))


def exponential(dst, src, max_value=0.0, reduce_res=None, reduce_cmd=reduce_cmd.idle,
                reduce_init=0.0, name=None) -> NkiInstruction:
    return _done("exponential", _acc.exponential(dst, src, max_value, reduce_res, reduce_cmd,
                                                 reduce_init))


def reciprocal(dst, data, name=None) -> NkiInstruction:
    return _done("reciprocal", _c.reciprocal(dst, data))


def max8(dst, src, name=None) -> NkiInstruction:
    return _done("max8", _c.max8(dst, src))


def scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False,
                         name=None) -> NkiInstruction:
    return _done("scalar_tensor_tensor", _c.scalar_tensor_tensor(
        dst, data, op0, operand0, op1, operand1, reverse0, reverse1))


def tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res=None, reverse0=False,
                         reduce_cmd=reduce_cmd.reset_reduce, reduce_init=None,
                         reduce_res_negate=False, name=None) -> NkiInstruction:
    return _done("tensor_scalar_reduce", _acc.tensor_scalar_reduce(
        dst, data, op0, operand0, reduce_op, reduce_res, reverse0, reduce_cmd, reduce_init,
        reduce_res_negate))


def range_select(dst, on_true_tile, comp_op0, comp_op1, bound0, bound1,
                 reduce_cmd=reduce_cmd.reset_reduce, reduce_res=None, reduce_op=maximum,
                 range_start=0, on_false_value=None, name=None) -> NkiInstruction:
    return _done("range_select", _acc.range_select(
        dst, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd, reduce_res, reduce_op,
        range_start, on_false_value))


def select_reduce(dst, predicate, on_true, on_false, reduce_res=None, reduce_cmd=reduce_cmd.idle,
                  reduce_op=maximum, reverse_pred=False, name=None) -> NkiInstruction:
    return _done("select_reduce", _acc.select_reduce(dst, predicate, on_true, on_false,
                                                     reduce_res, reduce_cmd, reduce_op,
                                                     reverse_pred))


def nc_find_index8(dst, data, vals, name=None) -> NkiInstruction:
    return _done("nc_find_index8", _c.nc_find_index8(dst, data, vals))


def nc_match_replace8(dst, data, vals, imm, dst_idx=None, name=None) -> NkiInstruction:
    if dst_idx is not None:
        _c.nc_find_index8(dst_idx, data, vals, reverse=True, api="nki.isa.nc_match_replace8")
    return _done("nc_match_replace8", _c.nc_match_replace8(dst, data, vals, imm))


def tensor_scalar_cumulative(dst, src, op0, op1, imm0, imm1=None,
                             reduce_cmd=reduce_cmd.reset_reduce, name=None) -> NkiInstruction:
    return _done("tensor_scalar_cumulative", _acc.tensor_scalar_cumulative(
        dst, src, op0, op1, imm0, imm1, reduce_cmd))


def activate2(dst, op, data, imm0, imm1, op0, op1, relu_param=0.0, reverse0=False,
              reverse1=False, reduce_op=None, reduce_res=None, reduce_cmd=reduce_cmd.idle,
              name=None) -> NkiInstruction:
    return _done("activate2", _acc.activate2(dst, op, data, imm0, imm1, op0, op1, relu_param,
                                             reverse0, reverse1, reduce_op, reduce_res,
                                             reduce_cmd))


def local_gather(dst, src_buffer, index, num_elem_per_idx=1, num_valid_indices=None,
                 name=None) -> NkiInstruction:
    return _done("local_gather", _g.local_gather(dst, src_buffer, index, num_elem_per_idx,
                                                 num_valid_indices))


def nc_n_gather(dst, data, indices, name=None) -> NkiInstruction:
    return _done("nc_n_gather", _g.nc_n_gather(dst, data, indices))


def nc_stream_shuffle(dst, src, shuffle_mask, name=None) -> NkiInstruction:
    return _done("nc_stream_shuffle", _g.nc_stream_shuffle(dst, src, shuffle_mask))


def sequence_bounds(dst, segment_ids, name=None) -> NkiInstruction:
    return _done("sequence_bounds", _g.sequence_bounds(dst, segment_ids))


def nonzero_with_count(dst, src, index_offset=0, padding_val=-1, name=None) -> NkiInstruction:
    return _done("nonzero_with_count", _g.nonzero_with_count(dst, src, index_offset,
                                                             padding_val))


def core_barrier(data, cores, engine=engine.gpsimd, name=None) -> NkiInstruction:
    _cores.core_barrier(data, cores, engine)
    return _done("core_barrier", data)


def sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine=dma_engine.dma,
             name=None) -> NkiInstruction:
    return _done("sendrecv", _cores.sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id,
                                             dma_engine))


def dma_compute(dst, srcs, reduce_op, scales=None, unique_indices=True, oob_mode=oob_mode.error,
                name=None) -> NkiInstruction:
    return _done("dma_compute", _cores.dma_compute(dst, srcs, reduce_op, scales, unique_indices,
                                                   oob_mode))


def register_move(dst, src) -> None:
    _cores.register_move(dst, src)


def register_load(dst, src) -> None:
    _cores.register_load(dst, src)


def register_store(dst, src) -> None:
    _cores.register_store(dst, src)


def set_rng_seed(src_seeds, name=None) -> NkiInstruction:
    _mv.set_rng_seed(src_seeds)
    return _done("set_rng_seed")


def quantize_mx(dst, src, dst_scale, name=None) -> NkiInstruction:
    return _done("quantize_mx", _mx.quantize_mx(dst, src, dst_scale))


def nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, tile_position=None,
                 tile_size=None, accumulate=None, name=None) -> NkiInstruction:
    return _done("nc_matmul_mx", _mx.nc_matmul_mx(dst, stationary, moving, stationary_scale,
                                                  moving_scale, tile_position, tile_size,
                                                  accumulate))


def topk(val_dst, idx_dst, src, n, name=None) -> NkiInstruction:
    _g.topk(val_dst, idx_dst, src, n)
    return _done("topk", val_dst)


def rand_set_state(src_seeds, engine=engine.gpsimd, name=None) -> NkiInstruction:
    _rs.rand_set_state(src_seeds, engine)
    return _done("rand_set_state")


def rand_get_state(dst, engine=engine.gpsimd, name=None) -> NkiInstruction:
    return _done("rand_get_state", _rs.rand_get_state(dst, engine))



__all__ = [
    "NkiInstruction", "NkiValidationError", "VirtualRegister", "activate2", "activation", "activation_reduce", "affine_select",
    "bn_aggr", "bn_stats", "dge_mode", "dma_copy", "dma_engine", "dma_transpose", "dropout",
    "engine", "exponential", "get_nc_sub_version", "get_nc_version", "gpsimd_engine", "iota",
    "matmul_perf_mode", "max8", "memset", "nc_find_index8", "nc_match_replace8", "nc_matmul",
    "nc_transpose", "nc_version", "oob_mode", "rand2", "range_select", "reciprocal",
    "reduce_cmd", "rng", "scalar_engine", "scalar_tensor_tensor", "select_reduce", "tensor_copy",
    "tensor_copy_predicated", "tensor_engine", "tensor_partition_reduce", "tensor_reduce",
    "tensor_scalar", "tensor_scalar_reduce", "tensor_tensor", "tensor_tensor_scan",
    "unknown_engine", "vector_engine", "tensor_scalar_cumulative", "local_gather", "nc_n_gather",
    "nc_stream_shuffle", "sequence_bounds", "nonzero_with_count", "core_barrier", "sendrecv",
    "dma_compute", "register_alloc", "register_move", "register_load", "register_store",
    "set_rng_seed", "rand_set_state", "rand_get_state", "topk", "quantize_mx", "nc_matmul_mx",
]
