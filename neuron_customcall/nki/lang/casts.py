"""Beta 1's ``nl.static_cast`` and ``nl.finfo``: dtype conversion of values known while tracing
(scalars) or of tiles, and the limits of a float dtype."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from emulator.kernel_ir import dtypes as ir_dtypes

from .. import dtypes as nkd
from ..indexing import Idx
from ..tile import Tile
from .memory import copy
from .operands import is_scalar, operand, scalar_value


def static_cast(input_data, dtype):
    """``input_data`` converted to ``dtype``: a Python/NumPy scalar becomes a NumPy scalar of the
    dtype's storage (rounded as the dtype rounds); a tile or an index expression becomes a new
    tile of that dtype."""
    name = nkd.name_of(dtype)
    if is_scalar(input_data):
        if nkd.is_packed(name):
            raise TypeError(f"static_cast to packed dtype {name}: a scalar has no packed form")
        return ir_dtypes.to_numpy(name).type(scalar_value(input_data))
    if isinstance(input_data, (Tile, Idx)):
        return copy(operand(input_data), dtype=name)
    if isinstance(input_data, np.ndarray):
        return input_data.astype(ir_dtypes.to_numpy(name))
    raise TypeError(f"static_cast takes a scalar, a tile or an array, not {type(input_data).__name__}")


def finfo(dtype):
    """Machine limits of a float dtype (NumPy's ``finfo`` interface, from ml_dtypes for bfloat16
    and fp8). tfloat32 is stored as float32 but rounds to 10 mantissa bits, so float32's limits
    would be wrong for it: refused."""
    name = nkd.name_of(dtype)
    if not nkd.is_float(name) or name == "tfloat32":
        raise TypeError(f"finfo: {name} is not a float dtype with a NumPy type")
    return ml_dtypes.finfo(ir_dtypes.to_numpy(name))
