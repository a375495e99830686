"""Turning what a kernel passes (tiles, Python scalars, index expressions, masks, op functions)
into IR operands; buffers and ``par_dim`` (``tile_size`` is in ``constants.py``)."""

from __future__ import annotations

import numpy as np

from emulator import machine
from emulator.kernel_ir import affine_to_json, ops

from .. import dtypes as nkd
from ..errors import NonAffineIndexError
from ..dynamic_index import DynamicIndex, set_materialiser
from ..indexing import Idx, Pred, broadcast_index_shapes
from ..tile import Tile
from ..tracer import current

# --- buffers, par_dim, tile sizes ------------------------------------------------------------------

sbuf = machine.SBUF
psum = machine.PSUM
hbm = machine.HBM
private_hbm = machine.HBM
shared_hbm = machine.SHARED_HBM


class par_dim(int):  # noqa: N801  (NKI's name)
    """Marks the partition dimension in an allocation shape: ``(nl.par_dim(128), 512)``."""


# --- helpers ---------------------------------------------------------------------------------------

def buffer_name(buffer) -> str:
    name = getattr(buffer, "name", buffer) if buffer is not None else sbuf
    name = getattr(buffer, "memory", name)  # nl.MemoryRegion members, nki.compiler allocators
    if name not in machine.MEMORY_SPACES:
        raise current().error("unknown buffer", f"{buffer!r} is not sbuf, psum, hbm or shared_hbm")
    return name


def as_shape(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


def is_scalar(x) -> bool:
    return isinstance(x, (int, float, bool, np.number, np.bool_))


def scalar_value(x):
    return x.item() if hasattr(x, "item") else x


def iota_tile(idx: Idx, dtype: str = "int32", shape: tuple[int, ...] | None = None) -> Tile:
    """An index expression used as data: materialise it with ``iota``. Index expressions
    broadcast as NumPy arrays do (the indexing guide's ``i_p``/``i_f`` grids), so ``shape``,
    when given, is the NumPy broadcast shape the expression is right-aligned in."""
    shape = shape or idx.shape or (1,)
    return current().new("iota", shape, dtype, expr=affine_to_json(idx.to_affine(len(shape))))


def pred_tile(pred: Pred) -> Tile:
    """A mask used as data: a bool tile, true where every expression is >= 0. Its expressions
    broadcast together as index expressions (NumPy's rule), so each is materialised at the
    common shape before they are combined."""
    tr = current()
    shape: tuple[int, ...] = ()
    try:
        for e in pred.exprs:
            shape = broadcast_index_shapes(shape, e.shape)
    except NonAffineIndexError as e:
        raise tr.error("shape mismatch", f"mask used as data: {e}") from None
    result = None
    for e in pred.exprs:
        idx = iota_tile(e, shape=shape)
        t = tr.new("tensor_scalar", idx.shape, "bool", idx, 0, op0="greater_equal",
                   reverse0=False)
        if result is not None:
            t = tr.new("tensor_tensor", idx.shape, "bool", result, t, op="logical_and")
        result = t
    return result


def dynamic_index_tile(d: DynamicIndex) -> Tile:
    """``iota(expr) + offset``: a dynamic index used as data (what ``Idx + tile`` computes)."""
    tr = current()
    base = iota_tile(d.expr)
    return tr.new("tensor_tensor", broadcast_shapes(tr, base.shape, d.offset.shape),
                  nkd.promote(base.dtype_name, d.offset.dtype_name), base, d.offset, op="add")


set_materialiser(dynamic_index_tile)


def operand(x):
    """Tile, Python scalar, or a materialised index expression / mask."""
    if isinstance(x, Tile):
        return x
    if isinstance(x, Idx):
        return iota_tile(x)
    if isinstance(x, Pred):
        return pred_tile(x)
    if isinstance(x, DynamicIndex):  # ``iy + offsets[0, k]`` used as data
        return x.materialise()
    if is_scalar(x):
        return scalar_value(x)
    if isinstance(x, np.ndarray) and x.ndim == 0:
        return x.item()
    raise current().error("invalid operand", f"{type(x).__name__} is not a tile or a scalar")


def as_partition_column(x):
    """An on-chip partition-only tile ``[P]`` as the ``[P, 1]`` view NKI reads it as (for
    operations that name free axes: reductions, transposes, matmul operands); anything else
    unchanged."""
    if isinstance(x, Tile) and x.ndim == 1 and x.on_chip:
        return x.reshape((x.shape[0], 1))
    return x


def nki_broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """The shape two tiles broadcast to as NKI aligns them, or None. Axis 0 is the partition
    axis of both: a tile of lower rank gets trailing (free) axes of extent 1, so a
    partition-only ``[P]`` tile (a reduction without ``keepdims``) is ``[P, 1]`` and broadcasts
    along the free axes. NumPy would align it with the *last* axis instead, which silently
    gives another answer whenever P equals the free size. Rank 0 (a scalar) fits anything."""
    if not a or not b:
        return tuple(a or b)
    n = max(len(a), len(b))
    a = tuple(a) + (1,) * (n - len(a))
    b = tuple(b) + (1,) * (n - len(b))
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return tuple(out)


def broadcast_shapes(tr, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """``nki_broadcast`` or a trace error naming the rule."""
    out = nki_broadcast(a, b)
    if out is None:
        raise tr.error("shape mismatch",
                       f"tiles {list(a)} and {list(b)} do not broadcast: NKI aligns tiles at the "
                       "partition axis (axis 0), a lower-rank tile gets trailing free axes of "
                       "extent 1, and each axis must match or be 1")
    return out


def check_fits(tr, value: tuple[int, ...], dst: tuple[int, ...], what: str) -> None:
    """An assignment's value must broadcast to its destination without growing it (NKI's
    err_store_dst_shape_smaller_than_other_shape): ``[P]`` and ``[P, 1]`` fit each other."""
    out = nki_broadcast(value, dst)
    if out is None or out != tuple(dst) + (1,) * (len(out) - len(dst)):
        raise tr.error("assignment shape",
                       f"{what}: a value of shape {list(value)} does not fit a destination of "
                       f"shape {list(dst)}; the value must have the destination's shape or "
                       "broadcast to it (NKI aligns tiles at the partition axis, a [P] tile is "
                       "[P, 1])")


def alu_op_name(op) -> str:
    """ALU operator name of ``nl.add``, ``np.add``, or "add"."""
    name = getattr(op, "_nki_alu", None) or getattr(op, "__name__", op)
    name = {"true_divide": "divide", "max": "maximum", "min": "minimum"}.get(name, name)
    if name not in ops.ALU_OPS:
        raise current().error("unknown operator", f"{op!r} is not an ALU operator")
    return name


def activation_name(op) -> str:
    name = getattr(op, "_nki_act", None) or getattr(op, "__name__", op)
    if name not in ops.ACTIVATIONS:
        raise current().error("unknown activation", f"{op!r} is not an activation function")
    return name
