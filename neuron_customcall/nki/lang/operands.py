"""Turning what a kernel passes (tiles, Python scalars, index expressions, masks, op functions)
into IR operands; buffers, ``par_dim`` and ``tile_size``."""

from __future__ import annotations

import numpy as np

from emulator import machine
from emulator.kernel_ir import affine_to_json, ops

from ..indexing import Idx, Pred
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


class tile_size:  # noqa: N801
    pmax = machine.NUM_PARTITIONS
    psum_fmax = machine.PSUM_FMAX
    gemm_stationary_fmax = machine.GEMM_STATIONARY_FMAX
    gemm_moving_fmax = machine.GEMM_MOVING_FMAX


# --- helpers ---------------------------------------------------------------------------------------

def buffer_name(buffer) -> str:
    name = getattr(buffer, "name", buffer) if buffer is not None else sbuf
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


def iota_tile(idx: Idx, dtype: str = "int32") -> Tile:
    """An index expression used as data: materialise it with ``iota``."""
    shape = idx.shape or (1,)
    return current().new("iota", shape, dtype, expr=affine_to_json(idx.to_affine(len(shape))))


def pred_tile(pred: Pred) -> Tile:
    """A mask used as data: a bool tile, true where every expression is >= 0."""
    tr = current()
    result = None
    for e in pred.exprs:
        idx = iota_tile(e)
        t = tr.new("tensor_scalar", idx.shape, "bool", idx, 0, op0="greater_equal",
                   reverse0=False)
        if result is not None:
            t = tr.new("tensor_tensor", broadcast_shapes(tr, result.shape, t.shape), "bool",
                       result, t, op="logical_and")
        result = t
    return result


def operand(x):
    """Tile, Python scalar, or a materialised index expression / mask."""
    if isinstance(x, Tile):
        return x
    if isinstance(x, Idx):
        return iota_tile(x)
    if isinstance(x, Pred):
        return pred_tile(x)
    if is_scalar(x):
        return scalar_value(x)
    if isinstance(x, np.ndarray) and x.ndim == 0:
        return x.item()
    raise current().error("invalid operand", f"{type(x).__name__} is not a tile or a scalar")


def broadcast_shapes(tr, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        raise tr.error("shape mismatch", f"tiles {list(a)} and {list(b)} do not broadcast") from None


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
