"""Emitters of the data-dependent GpSimd/VectorE instructions: ``nc_n_gather``, ``local_gather``,
``sequence_bounds``, ``nonzero_with_count`` and ``nc_stream_shuffle`` (AWS ISA reference)."""

from __future__ import annotations

import math

import numpy as np

from emulator import machine

from .. import dtypes as nkd
from ..indexing import Idx
from ..tile import Tile
from ..tracer import current
from .emit import dtype_name, fail, fit, free_size, on_chip, result, tile

_ELEMS_PER_INDEX = (1, 2, 4, 8, 16, 32)


def _sbuf(t: Tile, what: str, api: str) -> None:
    if t.buffer != machine.SBUF:
        raise fail("memory", f"{api}: {what} must be in SBUF (GpSimd can not access "
                   f"{t.buffer}), got {t.name!r}")


def nc_n_gather(dst, data, indices, *, api="nki.isa.nc_n_gather") -> Tile:
    """Per partition, ``data``'s elements (free axes flattened) at the uint32 ``indices``; the
    result has ``indices``' shape and ``data``'s dtype (the language's ``gather_flattened``
    instruction: an index past the row reads the uninitialised value, NaN)."""
    x, idx = tile(data, "data", api), tile(indices, "indices", api)
    for t, what in ((x, "data"), (idx, "indices")):
        _sbuf(t, what, api)
    if idx.shape[0] != x.shape[0]:
        raise fail("gather shape", f"{api}: data {list(x.shape)} and indices {list(idx.shape)} "
                   "must have the same partitions")
    if nkd.is_float(idx.dtype_name) or idx.dtype_name == "bool":
        raise fail("indices dtype", f"{api}: indices must be uint32, got {idx.dtype_name}")
    return result(dst, "gather_flattened", idx.shape, x.dtype_name, x, idx, api=api)


def local_gather(dst, src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, *,
                 api="nki.isa.local_gather") -> Tile:
    """Gather within each group of 16 partitions: the group's indices (read partition-major, the
    first ``num_valid_indices`` of them) give element offsets into each partition's flattened
    row, ``num_elem_per_idx`` contiguous elements each: [P, ...] -> [P, valid * elems]."""
    x, idx = tile(src_buffer, "src_buffer", api), tile(index, "index", api)
    for t, what in ((x, "src_buffer"), (idx, "index")):
        _sbuf(t, what, api)
    p = x.shape[0]
    if idx.shape[0] != p or p % 16:
        raise fail("local_gather shape", f"{api}: src_buffer and index have the same partitions, "
                   f"a multiple of 16; got {list(x.shape)} and {list(idx.shape)}")
    if idx.dtype_name != "uint16":
        raise fail("index dtype", f"{api}: index must be uint16, got {idx.dtype_name}")
    ne = int(num_elem_per_idx)
    if ne not in _ELEMS_PER_INDEX:
        raise fail("num_elem_per_idx", f"{api}: num_elem_per_idx is one of {_ELEMS_PER_INDEX}, "
                   f"got {ne}")
    per_core = math.prod(idx.shape) // (p // 16)
    nv = per_core if num_valid_indices is None else int(num_valid_indices)
    if not 0 < nv <= min(per_core, 4096):
        raise fail("num_valid_indices", f"{api}: num_valid_indices must be 1..{min(per_core, 4096)}"
                   f" (the indices of one 16-partition slice), got {nv}")
    shape = (p, nv * ne)
    if dst is not None and free_size(dst.shape) != nv * ne:
        raise fail("dst shape", f"{api}: dst holds {free_size(dst.shape)} elements per partition, "
                   f"the gather {nv} x {ne}")
    if dst is not None:
        current().emit("local_gather", fit(dst, shape, api), x, idx, elems=ne, valid=nv)
        return dst
    return result(None, "local_gather", shape, x.dtype_name, x, idx, api=api, elems=ne, valid=nv)


def sequence_bounds(dst, segment_ids, *, dtype=None, api="nki.isa.sequence_bounds") -> Tile:
    """Per element, the [start, end) of its run of equal segment ids ([P, n] -> [P, 2, n]); id 0
    is padding: (n, -1)."""
    ids = tile(segment_ids, "segment_ids", api)
    if ids.ndim != 2:
        raise fail("sequence_bounds shape", f"{api}: segment_ids is [P, n], got {list(ids.shape)}")
    if ids.dtype_name not in ("float32", "int32"):
        raise fail("sequence_bounds dtype", f"{api}: segment_ids is float32 or int32, got "
                   f"{ids.dtype_name}")
    out = dtype_name(dtype, ids.dtype_name)
    if out not in ("float32", "int32"):
        raise fail("sequence_bounds dtype", f"{api}: the result is float32 or int32, got {out}")
    return result(dst, "sequence_bounds", (ids.shape[0], 2, ids.shape[1]), out, ids, api=api)


def nonzero_with_count(dst, src, index_offset=0, padding_val=-1, *,
                       api="nki.isa.nonzero_with_count") -> Tile:
    """On partitions 0, 16, ..., 112: the non-zero positions (+``index_offset``), padding, then
    the count ([P, n] -> [P, n + 1] int32); the other partitions of ``dst`` are left as they were."""
    x = tile(src, "src", api)
    _sbuf(x, "src", api)
    if not isinstance(dst, Tile):
        raise fail("dst", f"{api}: dst must be an SBUF tile")
    _sbuf(dst, "dst", api)
    if x.ndim != 2 or tuple(dst.shape) != (x.shape[0], x.shape[1] + 1):
        raise fail("nonzero_with_count shape", f"{api}: src is [P, n] and dst [P, n + 1]; got "
                   f"{list(x.shape)} and {list(dst.shape)}")
    if x.dtype_name not in ("float32", "int32") or dst.dtype_name != "int32":
        raise fail("nonzero_with_count dtype", f"{api}: src is float32 or int32 and dst int32; "
                   f"got {x.dtype_name} and {dst.dtype_name}")
    current().emit("nonzero_with_count", dst, x, offset=int(index_offset),
                   padding=int(padding_val))
    return dst


def nc_stream_shuffle(dst, src, shuffle_mask, *, api="nki.isa.nc_stream_shuffle") -> Tile:
    """Within each quadrant of 32 partitions, ``dst`` partition ``i`` <- ``src`` partition
    ``shuffle_mask[i]`` (255: unchanged)."""
    x = tile(src, "src", api)
    if not isinstance(dst, Tile):
        raise fail("dst", f"{api}: dst must be an on-chip tile")
    on_chip(x, "src", api)
    on_chip(dst, "dst", api)
    if dst.dtype_name != x.dtype_name or free_size(dst.shape) != free_size(x.shape):
        raise fail("nc_stream_shuffle operands", f"{api}: dst and src have the same dtype and "
                   f"elements per partition; got {x.dtype_name}{list(x.shape)} and "
                   f"{dst.dtype_name}{list(dst.shape)}")
    mask = [m.const if isinstance(m, Idx) and not m.terms else m for m in list(shuffle_mask)]
    if len(mask) != 32 or not all(isinstance(m, int) and (0 <= m < 32 or m == 255)
                                  for m in mask):
        raise fail("shuffle_mask", f"{api}: shuffle_mask is 32 partition numbers 0..31 (255: "
                   f"unchanged), got {shuffle_mask!r}")
    _shuffle_reads_src(mask, x.shape[0], dst.shape[0], api)
    current().emit("stream_shuffle", dst, fit(x, (x.shape[0], *dst.shape[1:]), api),
                   shuffle=mask)
    return dst


def _shuffle_reads_src(mask: list[int], src_parts: int, dst_parts: int, api: str) -> None:
    """``src`` and ``dst`` may cover different partitions (the reference's example broadcasts one
    partition to 32), but every ``dst`` partition the mask fills must read one ``src`` covers:
    quadrant ``q``'s partition ``i`` reads ``src`` partition ``q * 32 + mask[i]``."""
    for d in range(dst_parts):
        m = mask[d % 32]
        if m != 255 and (d // 32) * 32 + m >= src_parts:
            raise fail("shuffle_mask", f"{api}: dst partition {d} reads src partition "
                       f"{(d // 32) * 32 + m} (shuffle_mask[{d % 32}] = {m}), but src covers "
                       f"{src_parts} partitions")



def topk(val_dst, idx_dst, src, n, *, api="nki.isa.topk") -> Tile:
    """The K largest of each 16-partition snake of ``src`` (bf16 [P, X]; element ``e`` at
    partition ``e % 16``, column ``e // 16``, ``n`` elements) ascending into ``val_dst`` (bf16
    [P, K]) with their indices ``e`` in ``idx_dst`` (uint32 [P, K]), for every partition of the
    group. Ties: the lower index is the larger (docs/nki.md)."""
    x = tile(src, "src", api)
    for t, what, dt in ((x, "src", "bfloat16"), (val_dst, "val_dst", "bfloat16"),
                        (idx_dst, "idx_dst", "uint32")):
        if not isinstance(t, Tile):
            raise fail("dst", f"{api}: {what} must be an SBUF tile")
        _sbuf(t, what, api)
        if t.dtype_name != dt or t.ndim != 2:
            raise fail("topk operand", f"{api}: {what} is a {dt} [P, ...] tile, got "
                       f"{t.dtype_name}{list(t.shape)}")
    parts, cols = x.shape
    k = val_dst.shape[1]
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 8 <= int(n) < 65536:
        raise fail("topk n", f"{api}: 8 <= n < 65536, got {n!r}")
    n = int(n)
    if parts % 16 or val_dst.shape != (parts, k) or idx_dst.shape != (parts, k):
        raise fail("topk shape", f"{api}: src has a multiple of 16 partitions and val_dst, "
                   f"idx_dst are [P, K] with its P; got src {list(x.shape)}, val_dst "
                   f"{list(val_dst.shape)}, idx_dst {list(idx_dst.shape)}")
    if not 1 <= k < 32768 or k > n:
        raise fail("topk k", f"{api}: 1 <= K < 32768 and K <= n; got K={k}, n={n}")
    if cols < -(-n // 16):
        raise fail("topk shape", f"{api}: the snake of n={n} elements needs src to have "
                   f"{-(-n // 16)} columns, got {cols}")
    tr = current()
    both = tr.new("topk", (parts, 2, k), "float32", x, n=n)
    tr.emit("tensor_copy", val_dst, both[:, 0, :])
    tr.emit("tensor_copy", idx_dst, both[:, 1, :])
    return val_dst
