"""``nl.gather_flattened(data, indices)``: a gather along each partition's flattened free
dimensions, as NKI's reference defines it (``np.take_along_axis`` on ``[P, -1]`` reshapes)."""

from __future__ import annotations

from .. import dtypes as nkd
from ..tile import Tile
from ..tracer import current
from .operands import operand


def gather_flattened(data, indices, axis=0, dtype=None, *, mask=None) -> Tile:
    """``out[p, j...] = data[p].flatten()[indices[p, j...]]``: the shape of ``indices``, the
    dtype of ``data`` (or ``dtype``). Indices are uint32; an index past the end of a partition
    is "garbage" on hardware and reads the uninitialised value (NaN, 0 for integers) here.
    Beta 2 adds ``axis``, which its reference does not explain: only 0 (the beta 1 behaviour)
    is accepted."""
    tr = current()
    if axis != 0:
        raise tr.error("gather_flattened axis", f"axis={axis!r}: only axis=0 (each partition's "
                       "flattened free dimensions) is defined by the reference")
    data, indices = operand(data), operand(indices)
    for what, t in (("data", data), ("indices", indices)):
        if not isinstance(t, Tile) or not t.on_chip or not 2 <= len(t.shape) <= 4:
            raise tr.error("gather_flattened operand", f"{what} must be a 2- to 4-dimensional "
                           f"on-chip tile, got {t!r}")
    if indices.dtype_name != "uint32":
        raise tr.error("gather_flattened indices", f"indices must be uint32, got "
                       f"{indices.dtype_name}")
    if data.shape[0] != indices.shape[0]:
        raise tr.error("gather_flattened partitions", f"data has {data.shape[0]} partitions and "
                       f"indices {indices.shape[0]}")
    out_dtype = nkd.name_of(dtype) if dtype is not None else data.dtype_name
    return tr.new("gather_flattened", tuple(indices.shape), out_dtype, data, indices, mask=mask)
