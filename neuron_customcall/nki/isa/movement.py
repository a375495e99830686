"""Emitters of data movement and generation: copies (``tensor_copy``, ``dma_copy``,
``tensor_copy_predicated``), ``memset``, ``iota`` and ``affine_select`` (index expressions of beta 1,
access patterns of beta 2), transposes (``nc_transpose``, ``dma_transpose``) and random numbers
(``rng``, ``rand2``, ``dropout``)."""

from __future__ import annotations

import math

from emulator import machine
from emulator.kernel_ir import Affine, affine_to_json
from emulator.kernel_ir import divmod as dm

from .. import dtypes as nkd
from ..indexing import Idx, Pred
from ..lang import memory as lang_memory
from ..lang import rng as rng_state
from ..lang.operands import as_shape, operand, scalar_value
from ..tile import Tile
from ..tracer import current
from . import enums
from .compute import tensor_scalar, tensor_tensor
from .emit import (alu, dtype_name, enum_name, fail, fit, free_size, on_chip, result, tile,
                   tile_or_scalar)

_HBM = (machine.HBM, machine.SHARED_HBM)


def _engine(engine, allowed: tuple[str, ...], api: str) -> str | None:
    """The engine a kernel asked for (``None``: the default), refused outside ``allowed``."""
    name = enum_name(engine, "engine", enums.ENGINE_NAMES, api)
    if name == "unknown":
        return None
    if name not in allowed:
        raise fail("invalid engine", f"{api} runs on {', '.join(allowed)}, not {name}")
    return name


# --- copies ----------------------------------------------------------------------------------------

def tensor_copy(dst, src, *, engine=None, dtype=None, mask=None, api="nki.isa.tensor_copy") -> Tile:
    """On-chip copy (converting the dtype) on VectorE, ScalarE or GpSimd."""
    x = tile(src, "src", api)
    eng = _engine(engine, ("vector", "scalar", "gpsimd"), api)
    if eng == "gpsimd" and (x.buffer == machine.PSUM
                            or (dst is not None and dst.buffer == machine.PSUM)):
        raise fail("gpsimd operand location", f"{api}: GpSimd can not access PSUM")
    attrs = {"engine": eng} if eng not in (None, "vector") else {}
    if x.indirect is not None or (isinstance(dst, Tile) and dst.indirect is not None):
        return _dynamic_copy(dst, x, dtype_name(dtype, x.dtype_name), mask, attrs, api)
    return result(dst, "tensor_copy", x.shape, dtype_name(dtype, x.dtype_name), x, api=api,
                  mask=mask, **attrs)


def _dynamic_copy(dst: Tile | None, x: Tile, dtype: str, mask, attrs: dict, api: str) -> Tile:
    """An on-chip copy whose source or destination is at a dynamic offset (lang/dynamic.py):
    ``tensor_copy`` with the offset tile and ``indirect`` (``indirect_dst`` for the
    destination). HBM views at an offset are read and written by ``dma_copy``."""
    for t, what in ((x, "src"), (dst, "dst")):
        if t is not None and not t.on_chip:
            raise fail("dynamic copy location", f"{api}: {what} is in {t.buffer}; an on-chip copy "
                       "at a dynamic offset reads and writes SBUF/PSUM (nisa.dma_copy moves an "
                       "HBM view at a dynamic offset)")
    if x.indirect is not None and dst is not None and dst.indirect is not None:
        raise fail("dynamic copy", f"{api}: either src or dst may be at a dynamic offset, not "
                   "both")
    tr = current()
    if x.indirect is not None:
        dim, off = x.indirect
        return result(dst, "tensor_copy", x.shape, dtype, x.base_access(), off, api=api,
                      mask=mask, indirect=dim, **attrs)
    if dst is None:
        raise fail("dst", f"{api}: a copy to a dynamic offset needs its destination")
    dim, off = dst.indirect
    if dst.shape != x.shape:
        x = fit(x, dst.shape, api)
    tr.emit("tensor_copy", dst.base_access(), x, off, mask=mask, indirect=dim, indirect_dst=True,
            **attrs)
    return dst


def tensor_copy_dynamic_src(src, *, dtype=None, mask=None, engine=None,
                            api="nki.isa.tensor_copy_dynamic_src") -> Tile:
    """Beta 1: a copy of ``src``, an on-chip view at a dynamic offset (``t[ix, off[0, k]]``)."""
    x = tile(src, "src", api)
    if x.indirect is None:
        raise fail("dynamic copy", f"{api}: src must be indexed by a one-element offset tile "
                   "(src[i_p, offsets[0, k] ...])")
    return tensor_copy(None, x, engine=engine, dtype=dtype, mask=mask, api=api)


def tensor_copy_dynamic_dst(dst, src, *, dtype=None, mask=None, engine=None,
                            api="nki.isa.tensor_copy_dynamic_dst") -> Tile:
    """Beta 1: ``dst = src`` where ``dst`` is an on-chip view at a dynamic offset."""
    if not isinstance(dst, Tile) or dst.indirect is None:
        raise fail("dynamic copy", f"{api}: dst must be an on-chip view indexed by a one-element "
                   "offset tile (dst[i_p, offsets[0, k] ...])")
    x = tile(src, "src", api)
    if dtype is not None and dtype_name(dtype, x.dtype_name) != x.dtype_name:
        x = tensor_copy(None, x, dtype=dtype, api=api)
    return tensor_copy(dst, x, engine=engine, mask=mask, api=api)


def dma_copy(dst, src, *, dst_rmw_op=None, oob_mode=None, dge_mode=None, engine=None, mask=None,
             api="nki.isa.dma_copy") -> None:
    """DMA ``dst = src`` between HBM and SBUF (any pair): equal element counts, row-major, the
    dtype converted. HBM -> SBUF and SBUF -> HBM of one shape are ``load``/``store``; other
    pairs (and shapes) the ``dma_copy`` instruction. ``dst_rmw_op`` (beta 1) accumulates."""
    oob = enum_name(oob_mode, "oob_mode", enums.OOB_MODE_NAMES, api)
    enum_name(dge_mode, "dge_mode", enums.DGE_MODE_NAMES, api)
    enum_name(engine, "engine", enums.ENGINE_NAMES, api)
    if not isinstance(dst, Tile):
        raise fail("dst", f"{api}: dst must be a tensor, got {type(dst).__name__}")
    x = tile(src, "src", api)
    if math.prod(x.shape) != math.prod(dst.shape):
        raise fail("dma_copy size", f"{api}: src {list(x.shape)} and dst {list(dst.shape)} hold "
                   "different numbers of elements")
    for t, what in ((x, "src"), (dst, "dst")):
        if t.buffer == machine.PSUM:
            raise fail("dma_copy location", f"{api}: {what} {t.name!r} is in PSUM; DMA moves "
                       "data between HBM and SBUF")
    acc = alu(dst_rmw_op, api) if dst_rmw_op is not None else None
    tr = current()
    same = [n for n in dst.shape if n != 1] == [n for n in x.shape if n != 1]
    if x.indirect is not None or dst.indirect is not None:
        _indirect_dma_copy(dst, x, acc, oob == "skip", same, mask, api)
        return
    special = (bool(x.cast), bool(dst.cast))
    if same and x.buffer in _HBM and dst.buffer in machine.ON_CHIP and acc is None:
        if x.cast:  # a bit-cast HBM view: nl.load reinterprets the bits on chip
            tr.emit("tensor_copy", fit(dst, x.shape, api), lang_memory.load(x, mask=mask))
        else:
            tr.emit("load", fit(dst, x.shape, api), x, mask=mask)
    elif same and x.buffer in machine.ON_CHIP and dst.buffer in _HBM:
        view = fit(dst, x.shape, api) if not special[1] else dst
        if acc is not None:
            lang_memory.atomic_rmw(view, x, acc, mask=mask)
        elif special[1]:  # a bit-cast view: as nl.store does it
            lang_memory.store(view, x, mask=mask)
        else:
            tr.emit("store", view, x, mask=mask)
    elif any(special):
        raise fail("dma_copy view", f"{api}: a bit-cast view is copied between HBM and an "
                   "on-chip tile of its own shape")
    else:
        tr.emit("dma_copy", dst, x, mask=mask, acc=acc)


def _indirect_dma_copy(dst: Tile, x: Tile, acc, skip: bool, same: bool, mask, api: str) -> None:
    """``dma_copy`` with an index tile in the HBM side's subscript (indirect DMA): a gather
    ``load`` or a scatter ``store`` (``dst_rmw_op`` accumulates); ``oob_mode.skip`` skips
    out-of-bounds rows instead of failing."""
    tr = current()
    extra = {"oob_skip": True} if skip else {}
    if not same:
        raise fail("dma_copy shape", f"{api}: an indirect dma_copy keeps the shape: src "
                   f"{list(x.shape)}, dst {list(dst.shape)}")
    if x.indirect is not None and dst.indirect is None and acc is None:
        dim, offsets = x.indirect
        tr.emit("load", fit(dst, x.shape, api), x.base_access(), offsets, mask=mask,
                indirect=dim, **extra)
    elif dst.indirect is not None and x.indirect is None and x.buffer in machine.ON_CHIP:
        dim, offsets = dst.indirect
        tr.emit("store", dst.base_access(), x, offsets, mask=mask, acc=acc, indirect=dim, **extra)
    else:
        raise fail("indirect dma_copy", f"{api}: indirect DMA copies HBM rows named by an index "
                   "tile (or at a dynamic offset) into SBUF or HBM (src indexed) or SBUF into "
                   "HBM rows (dst indexed); dst_rmw_op only on the store")


def tensor_copy_predicated(dst, src, predicate, reverse_pred=False, *, mask=None,
                           api="nki.isa.tensor_copy_predicated") -> Tile:
    """Where ``predicate`` is non-zero (zero with ``reverse_pred``), ``src`` (a tile or scalar)
    into ``dst``; elsewhere ``dst`` keeps its values. A ``select`` reading ``dst`` itself."""
    pred = tile(predicate, "predicate", api)
    if not isinstance(dst, Tile):
        raise fail("dst", f"{api}: dst must be an on-chip tile")
    on_chip(dst, "dst", api)
    if nkd.is_float(pred.dtype_name):
        raise fail("predicate dtype", f"{api}: predicate must be an integer tile (uint8, uint16 "
                   f"or uint32), got {pred.dtype_name}")
    if pred.shape[0] != dst.shape[0] or free_size(pred.shape) != free_size(dst.shape):
        raise fail("predicate shape", f"{api}: predicate {list(pred.shape)} and dst "
                   f"{list(dst.shape)} must have the same partitions and elements per partition")
    pred = fit(pred, dst.shape, api)
    s = tile_or_scalar(src, "src", api)
    if isinstance(s, Tile):
        if s.dtype_name != dst.dtype_name:
            raise fail("tensor_copy_predicated dtype", f"{api}: src and dst share one dtype, got "
                       f"{s.dtype_name} and {dst.dtype_name}")
        s = fit(s, dst.shape, api)
    yes, no = (dst, s) if reverse_pred else (s, dst)
    current().emit("select", dst, pred, yes, no, mask=mask)
    return dst


def memset(dst, value, *, shape=None, dtype=None, engine=None, mask=None,
           api="nki.isa.memset") -> Tile:
    """Fill with the constant ``value`` (VectorE or GpSimd)."""
    eng = _engine(engine, ("vector", "gpsimd"), api)
    v = operand(value)
    if isinstance(v, Tile):
        raise fail("memset value", f"{api}: value is a compile-time constant, not a tile")
    attrs = {"engine": eng} if eng == "gpsimd" else {}
    if dst is None:
        return result(None, "memset", as_shape(shape), nkd.name_of(dtype), scalar_value(v),
                      api=api, mask=mask, **attrs)
    on_chip(dst, "dst", api)
    current().emit("memset", dst, scalar_value(v), mask=mask, **attrs)
    return dst


# --- index patterns --------------------------------------------------------------------------------

def iota_expr(expr, dtype, *, mask=None, api="nki.isa.iota") -> Tile:
    """Beta 1: an index expression (``arange``/``mgrid``/``program_id`` arithmetic) as values."""
    if not isinstance(expr, Idx):
        raise fail("invalid iota", f"{api} takes an index expression")
    shape = expr.shape or (1,)
    return current().new("iota", shape, nkd.name_of(dtype), mask=mask,
                         expr=affine_to_json(expr.to_affine(len(shape))))


def _pattern(pattern, api: str) -> list[tuple[int, int]]:
    try:
        dims = [(int(step), int(num)) for step, num in pattern]
    except (TypeError, ValueError):
        raise fail("invalid pattern", f"{api}: pattern is a list of [step, num] pairs, got "
                   f"{pattern!r}") from None
    if not 1 <= len(dims) <= 4 or any(n < 1 for _, n in dims):
        raise fail("invalid pattern", f"{api}: pattern has 1 to 4 [step, num] pairs with num >= 1, "
                   f"got {pattern!r}")
    return dims


def _pattern_affine(dims, offset: int, multiplier: int, shape: tuple[int, ...]) -> Affine | None:
    """``offset + multiplier * p + sum(step * position)`` over a tile of ``shape`` whose free
    axes are the pattern's dimensions (axes of size 1 aside); ``None`` if they are not."""
    axes = [i for i in range(1, len(shape)) if shape[i] != 1]
    pdims = [(s, n) for s, n in dims if n != 1]
    if [shape[i] for i in axes] != [n for _, n in pdims]:
        return None
    terms = {"t0": multiplier}
    for i, (step, _) in zip(axes, pdims):
        terms[f"t{i}"] = terms.get(f"t{i}", 0) + step
    return Affine.make(offset, terms)


def pattern_values(dims, offset: int, multiplier: int, shape: tuple[int, ...], api: str) -> Tile:
    """The pattern's int32 values as a tile of ``shape``: one ``iota`` when the free axes are
    the pattern's, else an ``iota`` in the pattern's own layout regrouped row-major by a DMA."""
    tr = current()
    if math.prod(n for _, n in dims) != free_size(shape):
        raise fail("pattern size", f"{api}: the pattern covers {math.prod(n for _, n in dims)} "
                   f"elements per partition, the tile {free_size(shape)}")
    aff = _pattern_affine(dims, offset, multiplier, shape)
    if aff is not None:
        return tr.new("iota", shape, "int32", expr=affine_to_json(aff))
    own = (shape[0],) + tuple(n for _, n in dims)
    values = tr.new("iota", own, "int32",
                    expr=affine_to_json(_pattern_affine(dims, offset, multiplier, own)))
    return tr.new("dma_copy", shape, "int32", values)


def iota_pattern(dst, pattern, offset=0, channel_multiplier=0, *, api="nki.isa.iota") -> Tile:
    """Beta 2: ``offset + channel_multiplier * p + sum(step * index)`` over an access pattern."""
    if not isinstance(dst, Tile):
        raise fail("dst", f"{api}: dst must be an SBUF tile")
    dims = _pattern(pattern, api)
    aff = _pattern_affine(dims, int(offset), int(channel_multiplier), dst.shape)
    if aff is not None and math.prod(n for _, n in dims) == free_size(dst.shape):
        current().emit("iota", dst, expr=affine_to_json(aff))
        return dst
    values = pattern_values(dims, int(offset), int(channel_multiplier), dst.shape, api)
    current().emit("tensor_copy", dst, values)
    return dst


def affine_select_pred(dst, pred, on_true_tile, on_false_value, *, dtype=None, mask=None,
                       api="nki.isa.affine_select") -> Tile:
    """Beta 1: ``on_true_tile`` where the affine predicate holds, else the scalar."""
    t = tile(on_true_tile, "on_true_tile", api)
    if not isinstance(pred, Pred):
        raise fail("affine_select predicate", f"{api}: pred must be an affine predicate of "
                   "index expressions (e.g. i_p >= i_f)")
    affs = pred.to_affines(t.ndim)
    return result(dst, "affine_select", t.shape, dtype_name(dtype, t.dtype_name), t,
                  float(on_false_value), api=api, mask=mask,
                  pred=[affine_to_json(a) for a in affs])


#: cmp_op(value, 0) as a conjunction of ``sign * value + shift >= 0`` (integer values): exact.
_AS_GE = {"greater_equal": ((1, 0),), "greater": ((1, -1),), "less_equal": ((-1, 0),),
          "less": ((-1, -1),), "equal": ((1, 0), (-1, 0))}


def affine_select_pattern(dst, pattern, channel_multiplier, on_true_tile, on_false_value,
                          cmp_op="equal", offset=0, *, api="nki.isa.affine_select") -> Tile:
    """Beta 2: ``on_true_tile`` where ``cmp_op(offset + channel_multiplier * p + pattern, 0)``,
    else ``on_false_value``. One ``affine_select`` when the comparison is a conjunction of
    ``>= 0`` tests over the tile's own axes; otherwise the values, a comparison and a select."""
    t = tile(on_true_tile, "on_true_tile", api)
    dims = _pattern(pattern, api)
    cmp = alu(cmp_op, api)
    target = fit(dst, t.shape, api) if isinstance(dst, Tile) else None
    if target is None:
        raise fail("dst", f"{api}: dst must be an SBUF tile")
    aff = _pattern_affine(dims, int(offset), int(channel_multiplier), t.shape)
    if aff is not None and cmp in _AS_GE and math.prod(n for _, n in dims) == free_size(t.shape):
        preds = [Affine.make(sign * aff.const + shift, {s: sign * c for s, c in aff.terms})
                 for sign, shift in _AS_GE[cmp]]
        current().emit("affine_select", target, t, float(on_false_value),
                       pred=[affine_to_json(p) for p in preds])
        return target
    values = pattern_values(dims, int(offset), int(channel_multiplier), t.shape, api)
    tr = current()
    keep = tr.new("tensor_scalar", t.shape, "bool", values, 0, op0=cmp, reverse0=False)
    tr.emit("select", target, keep, t, float(on_false_value))
    return target


# --- transposes ------------------------------------------------------------------------------------

def nc_transpose(dst, data, *, engine=None, dtype=None, mask=None, api="nki.isa.nc_transpose"
                 ) -> Tile:
    """Swap the partition and free axes of a 2-D tile: TensorE (up to 128x128, SBUF -> PSUM) or
    VectorE (up to 32x32, SBUF/PSUM)."""
    x = tile(data, "data", api)
    if x.ndim != 2:
        raise fail("transpose shape", f"{api} needs a 2-D tile, got {list(x.shape)}")
    eng = _engine(engine, ("tensor", "vector"), api)
    vector = eng == "vector" or (eng is None and max(x.shape) <= machine.VECTOR_ENGINE_TRANSPOSE_MAX)
    if vector and max(x.shape) > machine.VECTOR_ENGINE_TRANSPOSE_MAX:
        raise fail("transpose size", f"{api}: VectorE transpose of {list(x.shape)} exceeds 32x32")
    memory = machine.SBUF if vector else machine.PSUM
    if dst is not None and dst.dtype_name != x.dtype_name:
        raise fail("transpose dtype", f"{api}: dst has data's dtype ({x.dtype_name}), got "
                   f"{dst.dtype_name}")
    if not vector and dst is not None and (dst.buffer != machine.PSUM
                                           or x.buffer != machine.SBUF):
        raise fail("transpose location", f"{api}: TensorE transposes an SBUF tile into PSUM; got "
                   f"{x.buffer} -> {dst.buffer}")
    return result(dst, "transpose", (x.shape[1], x.shape[0]), dtype_name(dtype, x.dtype_name), x,
                  api=api, memory=memory, mask=mask, engine="vector" if vector else "tensor")


def permuted_view(t: Tile, axes: tuple[int, ...]) -> Tile:
    """The view of ``t`` with its axes in the order ``axes`` (no data moves)."""
    ren = {f"t{old}": f"t{new}" for new, old in enumerate(axes)}

    def renamed(sym: str) -> str:
        base = dm.base_of(sym)
        return ren.get(sym, sym) if base == sym else dm.rebase(sym, ren.get(base, base))

    index = tuple(Affine.make(a.const, {renamed(s): c for s, c in a.terms}) for a in t.index)
    return Tile(t.trace, t.decl, tuple(t.shape[a] for a in axes), index, t.cast, t.vshape)


def dma_transpose(dst, src, axes=None, *, dge_mode=None, dtype=None, mask=None,
                  api="nki.isa.dma_transpose") -> Tile:
    """DMA transpose: ``src`` with its axes permuted (reversed by default) into ``dst``, as one
    DMA reading ``src`` through the permuted view. ``dge_mode`` (how descriptors are generated)
    is checked but changes no value."""
    enum_name(dge_mode, "dge_mode", enums.DGE_MODE_NAMES, api)
    x = tile(src, "src", api)
    perm = tuple(reversed(range(x.ndim))) if axes is None else tuple(int(a) for a in axes)
    if sorted(perm) != list(range(x.ndim)) or x.ndim not in (2, 3, 4):
        raise fail("dma_transpose axes", f"{api}: axes must permute the {x.ndim} axes of a 2-D to "
                   f"4-D source, got {axes!r}")
    view = permuted_view(x, perm)
    out = dtype_name(dtype, x.dtype_name)
    if dst is None:
        op = "load" if x.buffer in _HBM else "dma_copy"
        return current().new(op, view.shape, out, view, mask=mask)
    dma_copy(dst, view, mask=mask, api=api)
    return dst


# --- random numbers --------------------------------------------------------------------------------

def rng(dst, *, engine=None, api="nki.isa.rng") -> Tile:
    """32 random bits per element, truncated to the integer ``dst`` (its least significant
    bits)."""
    _engine(engine, ("vector", "gpsimd"), api)
    if not isinstance(dst, Tile) or nkd.is_float(dst.dtype_name) or dst.dtype_name == "bool":
        raise fail("rng dtype", f"{api}: dst must be an int8/16/32 or uint8/16/32 tile")
    on_chip(dst, "dst", api)
    srcs, attrs = rng_state.draw()
    current().emit("random", dst, *srcs, **attrs, bits=True)
    return dst


def uniform(shape) -> Tile:
    """Uniform [0, 1) fp32 values from the kernel's stream (``nl.random_seed`` /
    ``nisa.set_rng_seed`` seed it)."""
    srcs, attrs = rng_state.draw()
    return current().new("random", tuple(shape), "float32", *srcs, **attrs)


def set_rng_seed(src_seeds, *, api="nki.isa.set_rng_seed") -> None:
    """Seed the generator with the 32-bit value of a [1, 1] SBUF/PSUM tile: later ``rng``,
    ``rand2``, ``dropout`` (and ``nl.rand``) draws are functions of it and of their order."""
    t = tile(src_seeds, "src_seeds", api)
    on_chip(t, "src_seeds", api)
    if tuple(t.shape) != (1, 1) or nkd.is_float(t.dtype_name) or t.itemsize != 4:
        raise fail("set_rng_seed operand", f"{api}: src_seeds is a [1, 1] tile of a 32-bit integer "
                   f"type, got {t.dtype_name}{list(t.shape)}")
    rng_state.random_seed(t)


def rand2(dst, low, high, *, api="nki.isa.rand2") -> Tile:
    """Uniform values in [low, high) (scalars or [P, 1] tiles), converted to ``dst``'s dtype."""
    if not isinstance(dst, Tile):
        raise fail("dst", f"{api}: dst must be an on-chip tile")
    on_chip(dst, "dst", api)
    lo, hi = tile_or_scalar(low, "min", api), tile_or_scalar(high, "max", api)
    if not isinstance(lo, Tile) and not isinstance(hi, Tile) and not float(lo) < float(hi):
        raise fail("rand2 range", f"{api}: min must be less than max, got {lo} and {hi}")
    u = uniform(dst.shape)
    if isinstance(lo, Tile) or isinstance(hi, Tile):
        span = tensor_tensor(None, *(v if isinstance(v, Tile) else _full_column(v, dst.shape[0])
                                     for v in (hi, lo)), "subtract", dtype="float32", api=api)
        return tensor_scalar(dst, u, "multiply", span, False, "add", lo, api=api)
    return tensor_scalar(dst, u, "multiply", float(hi) - float(lo), False, "add", float(lo),
                         api=api)


def _full_column(value: float, partitions: int) -> Tile:
    return current().new("memset", (partitions, 1), "float32", float(value))


def dropout(dst, data, prob, *, dtype=None, mask=None, api="nki.isa.dropout") -> Tile:
    """Each element zeroed with probability ``prob`` (a scalar or a [P, 1] tile), no rescaling."""
    x = tile(data, "data", api)
    p = tile_or_scalar(prob, "prob", api)
    u = uniform(x.shape)
    tr = current()
    if isinstance(p, Tile):
        keep = tensor_tensor(None, u, fit(p, (x.shape[0], 1), api), "greater_equal", api=api)
    else:
        keep = tr.new("tensor_scalar", x.shape, "bool", u, float(p), op0="greater_equal",
                      reverse0=False)
    return result(dst, "select", x.shape, dtype_name(dtype, x.dtype_name), keep, x, 0.0, api=api,
                  mask=mask)
