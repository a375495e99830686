"""``nisa.quantize_mx`` and ``nisa.nc_matmul_mx``: OCP microscaling (MX) on one NeuronCore.

The data are packed ``*_x4`` tiles (four float8/float4 elements per word, consecutive along the
contraction); each group of 8 partitions x 1 word (32 elements) shares one E8M0 scale
(float8_e8m0fnu, or its uint8 code). The arithmetic is emulator/kernel_exec/mx.py's.

Scale tiles are laid out as the MX guide's allocation rules say: for data of P <= 32 partitions
the scales of the P / 8 groups are rows 0.. of the scale view; for more, the scales stay in the
quadrant of their group, in the first 4 partitions of each quadrant (group ``i`` at partition
``(i // 4) * 32 + i % 4``), so the scale tile has the data's P partitions. A view starting 4, 8
or 12 partitions into a tile (``scale[4:, :]``) packs several tensors' scales into one tile.
The columns are the data's words (a wider scale view uses its first columns).
"""

from __future__ import annotations

from emulator import machine

from ..tile import Tile
from ..tracer import current
from .emit import fail, tile
from .matmul import _check_tiling, into_psum

_PACKED_FP8 = ("float8_e5m2_x4", "float8_e4m3fn_x4")
_PACKED = _PACKED_FP8 + ("float4_e2m1fn_x4",)
_SCALE_DTYPES = ("float8_e8m0fnu", "uint8")
#: Partitions per quadrant, and the scale rows each quadrant holds (32 / 8).
_QUADRANT = 32
_ROWS = _QUADRANT // 8


def _sbuf_tile(x, what: str, dtypes: tuple[str, ...], api: str) -> Tile:
    t = tile(x, what, api)
    if t.buffer != machine.SBUF:
        raise fail("mx operand location", f"{api}: {what} must be in SBUF, got {t.buffer}")
    if t.dtype_name not in dtypes or t.ndim != 2:
        raise fail("mx operand dtype", f"{api}: {what} is a 2-D {' or '.join(dtypes)} tile, got "
                   f"{t.dtype_name}{list(t.shape)}")
    return t


def _partitions(k: int, api: str, what: str) -> None:
    if k % _QUADRANT or not 0 < k <= machine.NUM_PARTITIONS:
        raise fail("mx partitions", f"{api}: {what} has a multiple of 32 partitions, at most "
                   f"{machine.NUM_PARTITIONS}; got {k}")


def _scale_rows(k: int) -> list[tuple[int, int, int]]:
    """(logical row, scale-view partition, count) runs of the scales of data with ``k``
    partitions (module docstring)."""
    groups = k // 8
    if k <= _QUADRANT:
        return [(0, 0, groups)]
    return [(q * _ROWS, q * _QUADRANT, _ROWS) for q in range(groups // _ROWS)]


def _check_scale_view(scale: Tile, k: int, words: int, what: str, api: str) -> None:
    rows = _scale_rows(k)
    need = rows[-1][1] + rows[-1][2]
    if scale.shape[0] < need or scale.shape[1] < words:
        raise fail("mx scale shape", f"{api}: {what} for data of {k} partitions and {words} "
                   f"words needs at least [{need}, {words}] (scales of 8-partition groups "
                   f"{'in rows 0..' if k <= _QUADRANT else 'in the first 4 partitions of each quadrant'}"
                   f"), got {list(scale.shape)}")


def quantize_mx(dst, src, dst_scale, *, api="nki.isa.quantize_mx") -> Tile:
    """Quantize fp16/bf16 ``src`` [P, F] into packed float8 ``dst`` [P, F / 4] and the groups'
    scales into ``dst_scale`` (module docstring), as the reference's scale rule says."""
    x = _sbuf_tile(src, "src", ("float16", "bfloat16"), api)
    out = _sbuf_tile(dst, "dst", _PACKED_FP8, api)
    sc = _sbuf_tile(dst_scale, "dst_scale", _SCALE_DTYPES, api)
    p, f = x.shape
    _partitions(p, api, "src")
    if f % 4:
        raise fail("mx free size", f"{api}: src's free size is a multiple of 4, got {f}")
    if tuple(out.shape) != (p, f // 4):
        raise fail("mx data shape", f"{api}: dst is [P, F / 4] = {[p, f // 4]} for src "
                   f"{list(x.shape)}, got {list(out.shape)}")
    _check_scale_view(sc, p, f // 4, "dst_scale", api)
    tr = current()
    tr.emit("quantize_mx", out, x)
    element = out.dtype_name[:-len("_x4")]
    logical = tr.new("quantize_mx", (p // 8, f // 4), sc.dtype_name, x, scales=True,
                     element=element)
    for row, part, n in _scale_rows(p):
        tr.emit("tensor_copy", sc[part:part + n, 0:f // 4], logical[row:row + n, :])
    return out


def _logical_scales(scale: Tile, k: int, words: int, what: str, api: str) -> Tile:
    """The scales of data with ``k`` partitions as one row per 8-partition group."""
    _check_scale_view(scale, k, words, what, api)
    rows = _scale_rows(k)
    if len(rows) == 1:
        return scale[0:k // 8, 0:words]
    tr = current()
    logical = Tile(tr, tr.declare((k // 8, words), scale.dtype_name, machine.SBUF))
    for row, part, n in rows:
        tr.emit("tensor_copy", logical[row:row + n, :], scale[part:part + n, 0:words])
    return logical


def nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, tile_position=None,
                 tile_size=None, accumulate=None, *, api="nki.isa.nc_matmul_mx") -> Tile:
    """The dequantized ``stationary.T @ moving`` of packed MX tiles into PSUM (fp32 or bf16),
    contracting the partitions and the 4 elements of each word; ``accumulate`` and row tiling
    as ``nc_matmul``."""
    st = _sbuf_tile(stationary, "stationary", _PACKED, api)
    mv = _sbuf_tile(moving, "moving", _PACKED, api)
    st_sc = _sbuf_tile(stationary_scale, "stationary_scale", _SCALE_DTYPES, api)
    mv_sc = _sbuf_tile(moving_scale, "moving_scale", _SCALE_DTYPES, api)
    k, m = st.shape
    n = mv.shape[1]
    _partitions(k, api, "stationary")
    if mv.shape[0] != k:
        raise fail("mx matmul shape", f"{api}: stationary and moving have the same partitions, "
                   f"got {list(st.shape)} and {list(mv.shape)}")
    if m % 2 or m > 128:
        raise fail("mx matmul shape", f"{api}: stationary's free size is even and at most 128, "
                   f"got {m}")
    out_dtype = dst.dtype_name if isinstance(dst, Tile) else "float32"
    limit = 8192 if out_dtype == "bfloat16" else 4096
    if n > limit:
        raise fail("mx matmul shape", f"{api}: moving's free size is at most {limit} for a "
                   f"{out_dtype} result, got {n}")
    if tile_position or tile_size:
        if not tile_position or not tile_size or int(tile_size[1]) != 128 \
                or int(tile_position[1]) != 0:
            raise fail("matmul tiling", f"{api}: only row tiling: tile_size (rows, 128) and "
                       f"tile_position (row, 0), got {tile_position!r}, {tile_size!r}")
        _check_tiling(st, tile_position, tile_size, api)
    srcs = (st, mv, _logical_scales(st_sc, k, m, "stationary_scale", api),
            _logical_scales(mv_sc, k, n, "moving_scale", api))
    return into_psum(dst, "matmul_mx", (m, n), "float32", srcs, accumulate, None, {}, api)


__all__ = ["quantize_mx", "nc_matmul_mx"]
