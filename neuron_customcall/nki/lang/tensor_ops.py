"""TensorE operations of the language: transpose and matmul."""

from __future__ import annotations

from .. import dtypes as nkd
from ..tile import Tile
from ..tracer import current
from .operands import new_tile, operand

# --- matmul and transpose --------------------------------------------------------------------------

def transpose(x, *, dtype=None, mask=None) -> Tile:
    """Swap the partition and free axes of a 2-D tile (TensorE transpose), result in SBUF."""
    x = operand(x)
    if x.ndim != 2:
        raise current().error("transpose shape", f"transpose needs a 2-D tile, got {list(x.shape)}")
    out = new_tile((x.shape[1], x.shape[0]),
               nkd.name_of(dtype) if dtype is not None else x.dtype_name)
    current().emit("transpose", out.access(), (x.access(),), {}, mask)
    return out


def matmul(x, y, *, transpose_x: bool = False, mask=None) -> Tile:
    """``x @ y`` (or ``x.T @ y`` with ``transpose_x``): ``nc_matmul(transpose(x), y)``, fp32 in
    PSUM. x is [M<=128, K<=128] (or [K, M] transposed), y is [K<=128, N<=512]."""
    from .. import isa
    x, y = operand(x), operand(y)
    stationary = x if transpose_x else transpose(x)
    return isa.nc_matmul(stationary, y, mask=mask)
