"""``nc_matmul``: TensorE ``stationary.T @ moving`` into PSUM, with the reference's tiling mode
(``tile_position``/``tile_size``), ``double_row`` performance mode and beta 2's ``accumulate``."""

from __future__ import annotations

from dataclasses import replace

from emulator import machine
from emulator.kernel_ir import Instruction, Loop

from .. import checks
from ..indexing import Idx, Pred
from ..tile import Tile
from ..tracer import current
from . import enums
from .emit import enum_name, fail, fit, tile

#: Row/column tile sizes of TensorE's tiling mode (2 x 64 on every generation, 4 x 32 from v3).
_TILE_SIZES = (32, 64, 128)
_FP8 = frozenset({"float8_e4m3", "float8_e5m2"})


def _static(v) -> int | None:
    """An int, or ``None`` for an affine expression whose value is only known per iteration."""
    if isinstance(v, Idx):
        return v.const if not v.terms else None
    return int(v)


def _check_tiling(st: Tile, tile_position, tile_size, api: str) -> None:
    """The reference's rules of tiling mode: both tuples or neither; sizes 32, 64 or 128;
    positions multiples of the sizes below 128; the stationary fits its row and column tile."""
    if not tile_position and not tile_size:
        return
    if not tile_position or not tile_size or len(tile_position) != 2 or len(tile_size) != 2:
        raise fail("matmul tiling", f"{api}: tile_position and tile_size are both (row, column) "
                   f"pairs, or both unset; got {tile_position!r}, {tile_size!r}")
    sizes = [_static(s) for s in tile_size]
    if any(s not in _TILE_SIZES for s in sizes):
        raise fail("matmul tiling", f"{api}: tile_size entries are 32, 64 or 128, got "
                   f"{tile_size!r}")
    for what, pos, size in zip(("row", "column"), tile_position, sizes):
        p = _static(pos)
        if p is not None and (p % size or not 0 <= p < machine.NUM_PARTITIONS):
            raise fail("matmul tiling", f"{api}: the starting {what} {p} must be a multiple of "
                       f"the {what} size {size} below {machine.NUM_PARTITIONS}")
    if st.shape[0] > sizes[0] or st.shape[-1] > sizes[1]:
        raise fail("matmul tiling", f"{api}: stationary {list(st.shape)} does not fit the "
                   f"{sizes[0]} x {sizes[1]} tile of tile_size")


def nc_matmul(dst, stationary, moving, *, is_stationary_onezero=False, is_moving_onezero=False,
              is_transpose=False, accumulate=None, tile_position=(), tile_size=(),
              perf_mode=None, mask=None, api="nki.isa.nc_matmul") -> Tile:
    """``stationary.T @ moving`` (contraction on the partition axis) into PSUM, fp32 (transpose
    mode: ``stationary.T`` in its own dtype). With ``dst``: ``accumulate`` False overwrites, True
    adds, an affine predicate (``i > 0``) picks per iteration, ``None`` adds when ``dst`` was
    written before and overwrites its first write (the reference: "auto-detect based on whether
    this PSUM location was previously written")."""
    tr = current()
    st, mv = tile(stationary, "stationary", api), tile(moving, "moving", api)
    _check_tiling(st, tile_position, tile_size, api)
    mode = enum_name(perf_mode if perf_mode is not None else "none", "matmul_perf_mode",
                     enums.PERF_MODE_NAMES, api)
    if mode == "double_row":
        return _double_row(dst, st, mv, accumulate, mask, api)
    checks.check_matmul_operands(tr, st.access(), mv.access(), transpose=bool(is_transpose))
    dtype = st.dtype_name if is_transpose else "float32"
    attrs = {"transpose": True} if is_transpose else {}
    shape = (st.shape[1], mv.shape[1])
    if is_transpose and dst is not None and fit(dst, shape, api).dtype_name != st.dtype_name:
        raise fail("matmul transpose dtype", f"{api}: a transpose-mode result has the "
                   f"stationary's dtype {st.dtype_name}, dst is {dst.dtype_name}")
    return into_psum(dst, "matmul", shape, dtype, (st, mv), accumulate, mask, attrs, api,
                     any_dtype=bool(is_transpose))


def into_psum(dst, op: str, shape: tuple[int, int], dtype: str, srcs: tuple, accumulate, mask,
              attrs: dict, api: str, any_dtype: bool = False) -> Tile:
    """Emit the TensorE product ``op(*srcs)`` of ``shape`` into ``dst`` (a PSUM tile, or a new
    one) with the reference's ``accumulate`` (see ``nc_matmul``)."""
    tr = current()
    if dst is None:
        if accumulate:
            raise fail("accumulate", f"{api}: accumulate needs a dst")
        return tr.new(op, shape, dtype, *srcs, memory=machine.PSUM, mask=mask, **attrs)
    view = fit(dst, shape, api)
    if view.buffer != machine.PSUM:
        raise fail("matmul result location", f"{api}: dst {view.name!r} is in {view.buffer}; "
                   "TensorE writes its result to PSUM")
    if not any_dtype and view.dtype_name not in ("float32", "bfloat16"):
        raise fail("matmul result dtype", f"{api}: dst is {view.dtype_name}; the result is "
                   "float32 (bfloat16 from NeuronCore-v4)")
    if accumulate is None:
        accumulate = _start_accumulating(tr, view)
    if accumulate is False or (not isinstance(accumulate, Pred) and not accumulate):
        tr.emit(op, view, *srcs, mask=mask, **attrs)
        return view
    # Accumulation: the product in its own PSUM tile, added by a copy (which the executor
    # forwards, so the product is summed straight into dst: no extra pass).
    prod = tr.new(op, shape, dtype, *srcs, memory=machine.PSUM, mask=mask, **attrs)
    if isinstance(accumulate, Pred):
        _by_predicate(tr, view, prod, accumulate, api)
    else:
        tr.emit("tensor_copy", view, prod, acc="add")
    return view


def _by_predicate(tr, view: Tile, prod: Tile, pred: Pred, api: str) -> None:
    """``accumulate=(k > 0)``: overwrite where the predicate fails, then add where it holds. In
    this order a loop run as one batch gives what the iterations in sequence give, for the
    reference's idiom (overwrite on the first iterations, accumulate on the later ones)."""
    tr.emit("tensor_copy", view, prod, mask=_negated(pred, api))
    tr.emit("tensor_copy", view, prod, mask=pred, acc="add")


def _negated(pred: Pred, api: str) -> Pred:
    """``not pred`` for a single ``e >= 0``: ``-e - 1 >= 0`` (integer index expressions)."""
    if len(pred.exprs) != 1:
        raise fail("accumulate", f"{api}: accumulate takes a bool or one comparison of loop "
                   "indices (i > 0)")
    return Pred([-pred.exprs[0] - 1])


def _start_accumulating(tr, view: Tile) -> bool:
    """``accumulate=None``: every write adds, and a tensor nothing wrote before has its
    allocation (``nl.ndarray``) start at zero, so that its first write equals an overwrite and
    later ones (in a loop: later iterations) accumulate. Returns True (accumulate)."""
    name = view.decl.name
    found = []
    for body in _bodies(tr.body):
        found += [(body, i) for i, s in enumerate(body)
                  if isinstance(s, Instruction) and s.dst is not None and s.dst.tensor == name]
    if all(body[i].op == "alloc" and "fill" not in body[i].attrs for body, i in found):
        for body, i in found:
            body[i] = replace(body[i], attrs={**body[i].attrs, "fill": 0.0})
    return True


def _bodies(body):
    yield body
    for s in body:
        if isinstance(s, Loop):
            yield from _bodies(s.body)


def _double_row(dst, st: Tile, mv: Tile, accumulate, mask, api: str) -> Tile:
    """FP8 double-row mode: the contraction runs over the partition axis and the first free axis
    (of size 2): ``[K, 2, M]`` and ``[K, 2, N]`` give ``[M, N]``; two matmuls, summed."""
    if st.ndim != 3 or mv.ndim != 3 or st.shape[1] != 2 or mv.shape[1] != 2:
        raise fail("double_row layout", f"{api}: double_row operands are [K, 2, M] and [K, 2, N], "
                   f"got {list(st.shape)} and {list(mv.shape)}")
    if st.dtype_name not in _FP8 or mv.dtype_name not in _FP8:
        raise fail("double_row dtype", f"{api}: double_row multiplies float8_e4m3/float8_e5m2 "
                   f"tiles, got {st.dtype_name} and {mv.dtype_name}")
    tr = current()
    shape = (st.shape[2], mv.shape[2])
    halves = [(st[:, j, :], mv[:, j, :]) for j in (0, 1)]
    for a, b in halves:
        checks.check_matmul_operands(tr, a.access(), b.access())
    total = tr.new("matmul", shape, "float32", *halves[0], memory=machine.PSUM, mask=mask)
    second = tr.new("matmul", shape, "float32", *halves[1], memory=machine.PSUM, mask=mask)
    tr.emit("tensor_copy", total, second, acc="add")
    if dst is None:
        return total
    view = fit(dst, shape, api)
    acc = _start_accumulating(tr, view) if accumulate is None else accumulate
    if isinstance(acc, Pred):
        _by_predicate(tr, view, total, acc, api)
    else:
        tr.emit("tensor_copy", view, total, acc="add" if acc else None)
    return view
