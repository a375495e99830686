"""VectorE instructions: copies and fills, random values, element-wise ALU ops, select,
reductions along free axes, batch-norm statistics, scans."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from emulator.kernel_ir import Const, Instruction
from emulator.kernel_ir.instructions import VECTOR

from .. import alu, mx
from .dma import copy
from .registry import EngineHandlers

if TYPE_CHECKING:  # the runner imports this table
    from ..runner import Runner

HANDLERS = EngineHandlers(VECTOR)
HANDLERS.register("tensor_copy")(copy)


@HANDLERS.register("memset")
def memset(r: Runner, ins: Instruction) -> None:
    r.write(ins, r.read(ins.srcs[0]))


@HANDLERS.register("random")
def random(r: Runner, ins: Instruction) -> None:
    """Uniform [0, 1) fp32 values, different for every program, iteration and element, and a pure
    function of them: element ``e`` of program/iteration ``(s1, s2, ...)`` gets
    ``counter_uniform(seed, id)`` with ``id`` the element's mixed-radix number over the full
    extents of the enclosing program ids and loop variables (symbols in name order) and the tile.
    So the values do not depend on how the executor runs the kernel: batched or Python-looped,
    in memory chunks, or split over host threads (parallel.py). Iterations of data-dependent
    loops count too (``ctx.iterations``); loops around the point where a seeded stream was
    seeded (``attrs["outer"]``: their numbers N of ``lN``) do not, as re-seeding the
    engine's generator with the same value repeats its numbers in every iteration."""
    ctx = r.ctx
    tile = tuple(ins.dst.shape)
    ident = np.arange(math.prod(tile), dtype=np.uint64).reshape(tile)
    stride = math.prod(tile)
    nb = len(ctx.batch_syms)
    ident = ident.reshape((1,) * nb + tile)
    axis = {s: i for i, s in enumerate(ctx.batch_syms)}
    outer = {f"l{n}" for n in ins.attrs.get("outer", ())}
    for sym in sorted((set(ctx.batch_syms) | set(ctx.bound)) - outer, reverse=True):
        if sym in axis:
            i = axis[sym]
            values = np.arange(ctx.batch_shape[i], dtype=np.uint64) + np.uint64(
                ctx.offsets.get(sym, 0))
            values = values.reshape(tuple(-1 if j == i else 1 for j in range(nb)) + (1,) * len(tile))
        else:
            values = np.uint64(ctx.bound[sym])
        ident = ident + values * np.uint64(stride)
        stride *= ctx.extents[sym]
    with np.errstate(over="ignore"):
        for var, k in sorted(ctx.iterations.items()):  # data-dependent loops: no extent
            if var not in outer:
                ident = ident + np.uint64(k) * np.uint64(stride % (1 << 64))
                stride <<= 32
    shape = ctx.batch_shape + tile
    seed = int(ins.attrs.get("seed", 0))
    if ins.srcs:  # nl.random_seed: the stream is a function of the seed tile's value
        user = r.read(ins.srcs[0], (1, 1)).astype(np.int64).astype(np.uint64)
        with np.errstate(over="ignore"):
            ident = ident + (user.reshape(user.shape[:nb] + (1,) * len(tile))
                             * np.uint64(0xD1B54A32D192ED03))
    bits = counter_bits(seed, np.broadcast_to(ident, shape))
    if ins.attrs.get("bits"):
        r.write(ins, (bits >> np.uint64(32)).astype(np.uint32))
    else:
        r.write(ins, (bits >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24))


def counter_bits(seed: int, ident: np.ndarray) -> np.ndarray:
    """64 random bits (uint64) from (seed, per-element counter) with SplitMix64's finaliser (a
    counter-based generator: any element can be computed on its own, in any order)."""
    z = ident.astype(np.uint64) + np.uint64((seed * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019)
                                            % (1 << 64))
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return z


def counter_uniform(seed: int, ident: np.ndarray) -> np.ndarray:
    """Uniform [0, 1) float32: the top 24 of ``counter_bits``."""
    return (counter_bits(seed, ident) >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)



@HANDLERS.register("tensor_tensor")
def tensor_tensor(r: Runner, ins: Instruction) -> None:
    tile = ins.dst.shape
    a = r.read(ins.srcs[0], tile, masked=True)
    b = r.read(ins.srcs[1], tile, masked=True)
    out = None if ins.attrs["op"] in alu.BOOL_OPS else r.result_array(tile, ins.srcs[:2])
    r.write(ins, alu.binary(ins.attrs["op"], a, b, out=out))


@HANDLERS.register("tensor_scalar")
def tensor_scalar(r: Runner, ins: Instruction) -> None:
    """``op1(op0(data, operand0), operand1)``; ``reverseN`` swaps the operands of opN. Operands are
    constants or per-partition [P, 1] tiles."""
    tile = ins.dst.shape
    x = r.read(ins.srcs[0], tile, masked=True)
    steps = [(ins.attrs.get(k), ins.attrs.get(rev), i)
             for k, rev, i in (("op0", "reverse0", 1), ("op1", "reverse1", 2))]
    steps = [s for s in steps if s[0] is not None]
    out = None if steps[-1][0] in alu.BOOL_OPS else r.result_array(tile, ins.srcs[:1])
    # op0 may compute into the result array too when nothing read later can be a view of it: a
    # fresh array is nobody's storage, and a constant second operand is no view at all. (A
    # per-partition operand1 may be a view of the destination or of ``data``.)
    early = out if out is not None and (out is r.fresh_array or len(steps) == 1
                                        or isinstance(ins.srcs[steps[-1][2]], Const)) else None
    for n, (op, rev, src_i) in enumerate(steps):
        operand = r.read(ins.srcs[src_i], tile, masked=True)
        dst = out if n == len(steps) - 1 else early
        x = alu.binary(op, operand, x, dst) if rev else alu.binary(op, x, operand, dst)
    r.write(ins, x)


@HANDLERS.register("select")
def select(r: Runner, ins: Instruction) -> None:
    tile = ins.dst.shape
    cond, x, y = (r.read(s, tile, masked=True) for s in ins.srcs)
    r.write(ins, np.where(cond.astype(bool), alu.widen(x), alu.widen(y)))


@HANDLERS.register("tensor_reduce")
def tensor_reduce(r: Runner, ins: Instruction) -> None:
    src = ins.srcs[0]
    x = alu.widen(r.read(src))
    nb = len(r.ctx.batch_shape)
    axes = tuple(nb + int(a) for a in ins.attrs["axes"])
    keep = bool(ins.attrs.get("keepdims", False))
    y = alu.reduce(ins.attrs["op"], x, axis=axes, keepdims=keep)
    if ins.attrs.get("negate"):
        y = -y
    r.write(ins, y.reshape(r.ctx.batch_shape + tuple(ins.dst.shape)))


@HANDLERS.register("bn_stats")
def bn_stats(r: Runner, ins: Instruction) -> None:
    """Per partition, (count, mean, variance) of each half of the free axis: [P, F] -> [P, 6]."""
    x = alu.widen(r.read(ins.srcs[0])).astype(np.float32)
    f = x.shape[-1]
    h = (f + 1) // 2
    parts = []
    for chunk in (x[..., :h], x[..., h:]):
        n = chunk.shape[-1]
        mean = chunk.mean(axis=-1) if n else np.zeros(chunk.shape[:-1], np.float32)
        var = chunk.var(axis=-1) if n else np.zeros(chunk.shape[:-1], np.float32)
        parts += [np.full(chunk.shape[:-1], n, np.float32), mean, var]
    r.write(ins, np.stack(parts, axis=-1))


@HANDLERS.register("bn_aggr")
def bn_aggr(r: Runner, ins: Instruction) -> None:
    """Combine bn_stats groups ([P, 6k]) into (mean, variance) per partition: [P, 2]."""
    s = alu.widen(r.read(ins.srcs[0])).astype(np.float32)
    s = s.reshape(s.shape[:-1] + (-1, 3))
    n, m, v = s[..., 0], s[..., 1], s[..., 2]
    total = n.sum(axis=-1)
    mean = (n * m).sum(axis=-1) / total
    var = (n * (v + (m - mean[..., None]) ** 2)).sum(axis=-1) / total
    r.write(ins, np.stack([mean, var], axis=-1))


@HANDLERS.register("tensor_tensor_scan")
def tensor_tensor_scan(r: Runner, ins: Instruction) -> None:
    """``out[:, i] = op1(op0(data0[:, i], out[:, i-1]), data1[:, i])`` with ``out[:, -1] =
    initial`` (AWS's ISA reference: data0 is op0's left operand, data1 op1's right one, unless
    ``reverseN``): a loop along the free axis, vectorised over partitions, grid and batch."""
    tile = ins.dst.shape
    d0 = alu.widen(r.read(ins.srcs[0], tile))
    d1 = alu.widen(r.read(ins.srcs[1], tile))
    init = alu.widen(r.read(ins.srcs[2], tile[:-1] + (1,)))
    op0, op1 = ins.attrs["op0"], ins.attrs["op1"]
    rev0, rev1 = bool(ins.attrs.get("reverse0")), bool(ins.attrs.get("reverse1"))
    out = np.empty(np.broadcast_shapes(d0.shape, d1.shape), dtype=alu.compute_dtype(d0, d1))
    prev = np.broadcast_to(init, out.shape[:-1] + (1,))[..., 0]
    for i in range(out.shape[-1]):
        a = alu.binary(op0, prev, d0[..., i]) if rev0 else alu.binary(op0, d0[..., i], prev)
        prev = alu.binary(op1, d1[..., i], a) if rev1 else alu.binary(op1, a, d1[..., i])
        out[..., i] = prev
    r.write(ins, out)


@HANDLERS.register("max8")
def max8(r: Runner, ins: Instruction) -> None:
    """The 8 largest values of each partition's free elements (all free axes), descending,
    compared in fp32 as the engine converts them; equal values are all kept. NaN sorts last."""
    x = alu.widen(r.read(ins.srcs[0])).astype(np.float32, copy=False)
    lead = x.ndim - len(ins.srcs[0].shape) + 1  # batch axes and the partition axis
    flat = x.reshape(x.shape[:lead] + (-1,))
    top = -np.partition(-flat, 7, axis=-1)[..., :8]
    r.write(ins, -np.sort(-top, axis=-1))


def _claims(x: np.ndarray, vals: np.ndarray, order) -> tuple[np.ndarray, np.ndarray]:
    """For each of the 8 ``vals`` per row (taken in ``order``), the position of the first element
    of the row equal to it that no earlier value claimed (or -1), and the claimed positions."""
    claimed = np.zeros(x.shape, dtype=bool)
    index = np.full(vals.shape, -1, dtype=np.int64)
    for i in order:
        hit = (x == vals[..., i:i + 1]) & ~claimed
        found = hit.any(axis=-1)
        pos = hit.argmax(axis=-1)
        index[..., i] = np.where(found, pos, -1)
        np.put_along_axis(claimed, pos[..., None],
                          np.take_along_axis(claimed, pos[..., None], -1) | found[..., None], -1)
    return index, claimed


def _rows(r: Runner, data_op, vals_op) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """``data`` as fp32 rows (batch axes and the partition axis, then its free elements) and the
    8 ``vals`` per row, broadcast to common batch axes; and the shape the rows came from."""
    x = alu.widen(r.read(data_op)).astype(np.float32, copy=False)
    v = alu.widen(r.read(vals_op)).astype(np.float32, copy=False)
    lead_x, lead_v = x.ndim - len(data_op.shape) + 1, v.ndim - len(vals_op.shape) + 1
    x, v = x.reshape(x.shape[:lead_x] + (-1,)), v.reshape(v.shape[:lead_v] + (-1,))
    rows = np.broadcast_shapes(x.shape[:-1], v.shape[:-1])
    full = rows + tuple(data_op.shape[1:])
    return (np.broadcast_to(x, rows + x.shape[-1:]), np.broadcast_to(v, rows + (8,)), full)


@HANDLERS.register("find_index8")
def find_index8(r: Runner, ins: Instruction) -> None:
    """``nc_find_index8``: the index of the first unclaimed occurrence of each of the 8 values,
    values taken in order (or from the last with ``reverse``); all ones where there is none."""
    x, vals, _ = _rows(r, ins.srcs[0], ins.srcs[1])
    order = range(7, -1, -1) if ins.attrs.get("reverse") else range(8)
    index, _ = _claims(x, vals, order)
    np_dtype = r.setup.np_dtypes[ins.dst.tensor]
    none = np.iinfo(np_dtype).max if np.issubdtype(np_dtype, np.unsignedinteger) else -1
    r.write(ins, np.where(index < 0, none, index))


@HANDLERS.register("match_replace8")
def match_replace8(r: Runner, ins: Instruction) -> None:
    """``nc_match_replace8``: ``data`` with the first unclaimed occurrence of each of the 8 values
    (taken from the last) replaced by ``imm``."""
    x, vals, full = _rows(r, ins.srcs[0], ins.srcs[1])
    _, claimed = _claims(x, vals, range(7, -1, -1))
    data = np.broadcast_to(alu.widen(r.read(ins.srcs[0])), full)
    r.write(ins, np.where(claimed.reshape(full), np.float32(ins.attrs["imm"]), data))


@HANDLERS.register("stream_shuffle")
def stream_shuffle(r: Runner, ins: Instruction) -> None:
    """``nc_stream_shuffle``: within each quadrant of 32 partitions, partition ``i`` of the result
    is partition ``mask[i]`` of ``src``; ``mask[i] == 255`` leaves ``dst``'s partition ``i``."""
    src = ins.srcs[0]
    mask = list(ins.attrs["shuffle"])
    x = r.read(src)
    old = r.read(ins.dst)
    src_parts, p = src.shape[0], ins.dst.shape[0]  # src may cover other partitions than dst
    keep = np.array([mask[i % 32] == 255 for i in range(p)])
    sel = np.array([0 if keep[i] else (i // 32) * 32 + mask[i % 32] for i in range(p)])
    if (sel >= src_parts).any():
        raise r.error("shuffle mask", f"nc_stream_shuffle reads partition {sel.max()} of a "
                      f"{src_parts}-partition source")
    got, old = np.broadcast_arrays(np.take(x, sel, axis=x.ndim - len(src.shape)), old)
    lead = got.ndim - len(ins.dst.shape)
    keep = keep.reshape((1,) * lead + (p,) + (1,) * (got.ndim - lead - 1))
    r.write(ins, np.where(keep, old, got))


@HANDLERS.register("quantize_mx")
def quantize_mx(r: Runner, ins: Instruction) -> None:
    """MX quantization (kernel_exec/mx.py): the packed data, or with ``scales`` the groups'
    scales in the destination's form (float8_e8m0fnu values or uint8 codes)."""
    src = ins.srcs[0]
    x = alu.widen(r.read(src)).astype(np.float32)
    dst_dtype = r.kernel.tensors[ins.dst.tensor].dtype
    if ins.attrs.get("scales"):
        v = x.reshape(x.shape[:-1] + (x.shape[-1] // mx.LANES, mx.LANES))
        exp = mx.group_exponents(v, str(ins.attrs.get("element", "")))
        r.write(ins, mx.exponents_as(exp, dst_dtype))
    else:
        words, _ = mx.quantize(x, dst_dtype)
        r.write(ins, words)
