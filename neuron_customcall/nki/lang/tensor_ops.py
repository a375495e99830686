"""TensorE operations: matmul (``nisa.nc_matmul`` is this module's ``nc_matmul``) and transpose."""

from __future__ import annotations

from emulator import machine

from .. import checks
from .. import dtypes as nkd
from ..tile import Tile
from ..tracer import current
from .operands import as_partition_column, operand

# --- matmul and transpose --------------------------------------------------------------------------

def transpose(x, dtype=None, *, mask=None) -> Tile:
    """Swap the partition and free axes of a 2-D tile (TensorE transpose), result in SBUF; a
    ``[P]`` tile is ``[P, 1]`` and becomes ``[1, P]``."""
    x = as_partition_column(operand(x))
    if x.ndim != 2:
        raise current().error("transpose shape", f"transpose needs a 2-D tile, got {list(x.shape)}")
    return current().new("transpose", (x.shape[1], x.shape[0]),
                         nkd.name_of(dtype) if dtype is not None else x.dtype_name, x, mask=mask)


def nc_matmul(stationary: Tile, moving: Tile, *, is_transpose: bool = False, mask=None) -> Tile:
    """TensorE: ``stationary.T @ moving``; both in SBUF, contraction on the partition axis; result
    fp32 in PSUM.

    ``is_transpose=True`` is the PE array's transpose mode (what ``nc_transpose`` on TensorE is
    built from): ``moving`` must be the [K, K] identity in ``stationary``'s dtype, and the
    [M, K] result, ``stationary.T``, keeps that dtype (values pass through the array unrounded)
    instead of becoming fp32. The shape and dtype rules are checked while tracing, the identity
    when the kernel runs (it is data)."""
    tr = current()
    st, mv = as_partition_column(operand(stationary)), as_partition_column(operand(moving))
    if not isinstance(st, Tile) or not isinstance(mv, Tile):
        raise tr.error("matmul operand", "nc_matmul takes two SBUF tiles")
    checks.check_matmul_operands(tr, st.access(), mv.access(), transpose=bool(is_transpose))
    dtype = st.dtype_name if is_transpose else "float32"
    attrs = {"transpose": True} if is_transpose else {}
    return tr.new("matmul", (st.shape[1], mv.shape[1]), dtype, st, mv, memory=machine.PSUM,
                  mask=mask, **attrs)


def matmul(x, y, transpose_x: bool = False, *, mask=None) -> Tile:
    """``x @ y`` (or ``x.T @ y`` with ``transpose_x``): ``nc_matmul(transpose(x), y)``, fp32 in
    PSUM. x is [M<=128, K<=128] (or [K, M] transposed), y is [K<=128, N<=512]."""
    x, y = operand(x), operand(y)
    stationary = x if transpose_x else transpose(x)
    return nc_matmul(stationary, y, mask=mask)
