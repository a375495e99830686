"""``NkiTensor.ap(pattern, offset)``: a view given as raw ``[[step, num], ...]`` over the tensor's
storage flattened row-major (NKI's access-pattern deep dive: element ``[i0, i1, ...]`` of the view
is ``storage.flatten()[offset + i0 * step0 + i1 * step1 + ...]``).

The emulator's accesses are per-dimension affine indices, so a pattern becomes one when each
step splits into whole steps of the tensor's dimensions and no dimension overflows into the next
over the pattern's counts (the pooling windows of AWS's average-pool example, slices, strided
rows, repeats). ``scalar_offset`` (a register or a one-element integer tile) adds its value to
dimension ``indirect_dim`` when the instruction runs (lang/dynamic.py); ``vector_offset`` (a
[P, 1] integer tile, HBM, ``indirect_dim`` 0) makes partition ``p`` read row ``offsets[p]``
(indirect DMA; the pattern's leading step is ignored, as the reference says). A pattern that
wraps across a row, a dtype reinterpretation of on-chip storage and patterns on tensors with block
dimensions are refused by name. ``dtype=`` on an HBM tensor is ``.view(dtype)`` of the whole
tensor with the pattern counted in elements of the new dtype.
"""

from __future__ import annotations

import math
import re

from emulator import machine
from emulator.kernel_ir import Affine
from emulator.kernel_ir import divmod as dm

from .. import dtypes as nkd
from ..errors import HardwareRuleError
from ..tile import Tile
from ..unsupported import refuse
from . import dynamic

#: The symbols of a view's own axes in its index (``views.identity_index``), and derived ones.
_VIEW_AXIS = re.compile(r"t\d+")


def _row_major_steps(shape: tuple[int, ...]) -> list[int]:
    return [math.prod(shape[k + 1:]) for k in range(len(shape))]


def _split(value: int, steps: list[int]) -> list[int]:
    """``value`` as whole steps of each dimension, outermost first (greedy)."""
    out = []
    for s in steps:
        out.append(value // s)
        value %= s
    return out


def _vector_offset(self: Tile, view: Tile, offsets, indirect_dim, api: str) -> Tile:
    """``vector_offset``: partition ``p`` of the view reads row ``offsets[p]`` of an HBM tensor
    (indirect DMA, as ``t[idx_tile, i_f]``); only ``indirect_dim`` 0, as the reference says."""
    if indirect_dim != 0 or view.on_chip:
        raise self.trace.error("invalid access pattern", f"{api}(vector_offset=...): indexes "
                               f"dimension 0 of an HBM tensor, got indirect_dim {indirect_dim!r} "
                               f"of a {view.buffer} tensor")
    if not isinstance(offsets, Tile) or not offsets.on_chip or \
            tuple(offsets.shape) != (view.shape[0], 1):
        raise self.trace.error("invalid access pattern", f"{api}(vector_offset=...): the offsets "
                               f"are a [{view.shape[0]}, 1] integer tile in SBUF (one row per "
                               f"partition of the pattern), got {offsets!r}")
    if nkd.name_of(offsets.dtype_name) not in dynamic.OFFSET_DTYPES:
        raise self.trace.error("dynamic offset dtype", f"{api}(vector_offset=...): offsets are "
                               f"integers, got {offsets.dtype_name}")
    return dynamic.at_offset(view, 0, offsets)


def ap(self: Tile, pattern, offset: int | None = None, scalar_offset=None, vector_offset=None,
       indirect_dim: int = 0, dtype=None) -> Tile:
    """The view ``pattern`` describes over ``self``'s storage (see the module docstring)."""
    api = "NkiTensor.ap"
    if vector_offset is not None and scalar_offset is not None:
        raise self.trace.error("invalid access pattern", f"{api}: scalar_offset or "
                               "vector_offset, not both")
    if dtype is not None and nkd.name_of(dtype) != self.dtype_name:
        if self.on_chip:
            refuse(f"{api}(dtype=...)", "reinterpreting on-chip storage through an access "
                   "pattern is not emulated (.view(dtype) gives a reinterpreted copy)")
        # The storage as ``dtype`` (a bit-cast view of the whole tensor), then the pattern in
        # elements of that dtype: what AWS's MX matmul deep dive reads its packed x4 data with.
        self.indirect_use(api)
        return ap(self.view(dtype), pattern, offset, scalar_offset, vector_offset, indirect_dim)
    self.indirect_use(api)
    if self.cast and (scalar_offset is not None or vector_offset is not None):
        self.bitcast_use(f"{api} with a dynamic offset")
    decl = self.decl
    if decl.name in self.trace.blocks:
        refuse(api, f"{decl.name!r} has block dimensions (nl.par_dim); its storage order is not "
               "the order of its shape")
    try:
        pairs = [(int(step), int(num)) for step, num in pattern]
    except (TypeError, ValueError):
        raise self.trace.error("invalid access pattern", f"{api}: pattern is a list of "
                               f"[step, num] pairs, got {pattern!r}") from None
    if vector_offset is not None and pairs:
        # The leading step is ignored: partition p reads row vector_offset[p] (the deep dive).
        pairs[0] = (0, pairs[0][1])
    if not pairs or any(num < 1 or step < 0 for step, num in pairs):
        raise self.trace.error("invalid access pattern", f"{api}: each [step, num] has num >= 1 "
                               f"and step >= 0, got {pattern!r}")
    # A bit-cast view's pattern walks the storage as the view's dtype (its shape: ``vshape``).
    shape = tuple(self.vshape) if self.vshape is not None else tuple(decl.shape)
    steps = _row_major_steps(shape)
    base = sum(a.const * s for a, s in zip(self.index, steps))  # the view's storage offset
    # The part of the view's start that varies with program ids and loop variables (a view
    # ``b[i, s:s + 1, :]`` inside a loop over ``s``), per dimension of the tensor.
    moving = [{sym: c for sym, c in a.terms if not _VIEW_AXIS.fullmatch(dm.base_of(sym))}
              for a in self.index]
    if offset is not None and (base or any(moving)):
        refuse(f"{api}(offset=...)", f"an explicit offset on a view that starts at element "
               f"{base if not any(moving) else 'depending on loop variables or program ids'} "
               "(the references differ on whether it adds to the view's offset); call .ap on "
               "the tensor itself")
    start = base if offset is None else int(offset)
    on_chip = decl.memory in machine.ON_CHIP
    if on_chip and pairs[0][0] != steps[0]:
        raise self.trace.error(
            "access pattern partition step",
            f"{api}: the first [step, num] of an {decl.memory} tensor walks its partitions, so "
            f"its step must be the tensor's elements per partition ({steps[0]}), got "
            f"{pairs[0][0]}", cls=HardwareRuleError)
    coeffs = [_split(step, steps) for step, _ in pairs]
    origin = _split(start, steps)
    index = []
    for k, extent in enumerate(shape):
        top = origin[k] + sum(c[k] * (num - 1) for c, (_, num) in zip(coeffs, pairs))
        if top >= extent:
            refuse(api, f"pattern {pattern!r} (offset {start}) runs past dimension {k} of "
                   f"{decl.name!r} {list(shape)} (to {top}): patterns that wrap across a "
                   "dimension are not emulated")
        index.append(Affine.make(origin[k], {**moving[k], **{f"t{d}": c[k] for d, c in
                                                             enumerate(coeffs) if c[k]}}))
    view = Tile(self.trace, decl, tuple(num for _, num in pairs), tuple(index), self.cast,
                self.vshape)
    if vector_offset is not None:
        return _vector_offset(self, view, vector_offset, indirect_dim, api)
    if scalar_offset is None:
        return view
    off = dynamic.offset_tile(self.trace, scalar_offset, f"{api}(scalar_offset=...)")
    if not isinstance(indirect_dim, int) or not 0 <= indirect_dim < len(shape):
        raise self.trace.error("invalid access pattern", f"{api}: indirect_dim {indirect_dim!r} "
                               f"is not a dimension of {decl.name!r} {list(shape)}")
    return dynamic.at_offset(view, indirect_dim, off)
