"""NKI dtypes and their promotion rules.

``nl.float32`` etc. are NumPy scalar types (ml_dtypes for bfloat16 and fp8) so that NumPy dtypes
and NKI dtypes can be used interchangeably; ``tfloat32`` has no NumPy type and is the string
"tfloat32". Internally every dtype is its kernel-IR name (see emulator/kernel_ir/dtypes.py).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from emulator import dtypes as records
from emulator.kernel_ir import dtypes as ir_dtypes

uint8 = np.uint8
int8 = np.int8
uint16 = np.uint16
int16 = np.int16
uint32 = np.uint32
int32 = np.int32
float8_e4m3 = ml_dtypes.float8_e4m3
float8_e5m2 = ml_dtypes.float8_e5m2
float16 = np.float16
bfloat16 = ml_dtypes.bfloat16
tfloat32 = "tfloat32"
float32 = np.float32
bool_ = np.bool_



def name_of(dtype: object) -> str:
    """IR dtype name of anything a user may pass as a dtype (NKI/NumPy type, np.dtype, name)."""
    if isinstance(dtype, str):
        if dtype in ir_dtypes.DTYPES:
            return dtype
        if dtype == "bool_":
            return "bool"
        return ir_dtypes.from_numpy(np.dtype(dtype))
    return ir_dtypes.from_numpy(dtype)


def numpy_dtype(name: str) -> object:
    """What ``tile.dtype`` returns: a NumPy dtype, or "tfloat32"."""
    return "tfloat32" if name == "tfloat32" else ir_dtypes.to_numpy(name)


def is_float(name: str) -> bool:
    return ir_dtypes.is_float(name)


def promote(a: str, b: str) -> str:
    """Result dtype of a binary operation on tiles of dtypes ``a`` and ``b``.

    * equal dtypes stay; bool yields to the other operand;
    * float and integer: the float;
    * two floats: the wider, except (float16, bfloat16) -> float32 (neither holds the other) and
      (float8_e4m3, float8_e5m2) -> bfloat16;
    * two integers: the smallest integer type holding both ranges, e.g. (int8, uint8) -> int16;
      pairs that would need 64 bits ((uint32, int32), (uint32, int8)...) give int32, the widest
      integer the engines have.
    """
    if a == b:
        return a
    if a == "bool":
        return b
    if b == "bool":
        return a
    fa, fb = is_float(a), is_float(b)
    if fa != fb:
        return a if fa else b
    if fa:
        pair = {a, b}
        if pair == {"float16", "bfloat16"}:
            return "float32"
        if pair == {"float8_e4m3", "float8_e5m2"}:
            return "bfloat16"
        return a if _float_rank(a) >= _float_rank(b) else b
    res = np.promote_types(ir_dtypes.to_numpy(a), ir_dtypes.to_numpy(b))
    if res.itemsize > 4:
        return "int32"
    return ir_dtypes.from_numpy(res)


def _float_rank(name: str) -> tuple[int, int]:
    """Wider storage first, then more precision (tfloat32 below float32; the equal pairs are
    decided before this is asked)."""
    r = records.BY_NKI[name]
    return r.bits, r.precision or 0


def promote_scalar(tile_dtype: str, scalar: object) -> str:
    """A Python scalar does not widen a tile's dtype, except a float scalar with an integer tile,
    which gives float32."""
    if isinstance(scalar, float) and not is_float(tile_dtype):
        return "float32"
    return tile_dtype
