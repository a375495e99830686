"""NKI dtypes and their promotion rules.

``nl.float32`` etc. are NumPy scalar types (ml_dtypes for bfloat16 and fp8) so that NumPy dtypes
and NKI dtypes can be used interchangeably, as in NKI beta 1; beta 2 spells dtypes as strings
("float32"), which work everywhere too. ``tfloat32`` and the packed ``*_x4`` types have no NumPy
type and are their names. Internally every dtype is its kernel-IR name (see
emulator/kernel_ir/dtypes.py).
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
float8_e4m3fn = ml_dtypes.float8_e4m3fn
float8_e5m2 = ml_dtypes.float8_e5m2
float8_e8m0fnu = ml_dtypes.float8_e8m0fnu
#: Four float8/float4 values in one stored word (emulator/dtypes.py: ``pack``/``unpack``).
float8_e5m2_x4 = "float8_e5m2_x4"
float8_e4m3fn_x4 = "float8_e4m3fn_x4"
float4_e2m1fn_x4 = "float4_e2m1fn_x4"
float16 = np.float16
bfloat16 = ml_dtypes.bfloat16
tfloat32 = "tfloat32"
float32 = np.float32
bool_ = np.bool_


class _Fp32Constants:
    """Beta 1's ``nl.fp32``: "FP32 constants", whose ``min`` is the bit pattern 0xff7fffff, the
    most negative finite float32. It also stands for float32 wherever a dtype is taken."""

    min = float(np.uint32(0xFF7FFFFF).view(np.float32))

    def __repr__(self) -> str:
        return "nl.fp32"


class _Bfp16Constants:
    """Beta 1's ``nl.bfp16``: bfloat16 constants; ``min`` is the bit pattern 0xff80 (which is
    bfloat16's -inf)."""

    min = float(np.uint16(0xFF80).view(ml_dtypes.bfloat16))

    def __repr__(self) -> str:
        return "nl.bfp16"


fp32 = _Fp32Constants()
bfp16 = _Bfp16Constants()

#: Dtypes whose NKI name is all there is of them (no NumPy type of their own).
_NAME_ONLY = frozenset({"tfloat32"}) | ir_dtypes.PACKED_NAMES


def name_of(dtype: object) -> str:
    """IR dtype name of anything a user may pass as a dtype (NKI/NumPy type, np.dtype, name)."""
    if isinstance(dtype, _Fp32Constants):
        return "float32"
    if isinstance(dtype, _Bfp16Constants):
        return "bfloat16"
    if isinstance(dtype, str):
        if dtype in ir_dtypes.DTYPES:
            return dtype
        if dtype == "bool_":
            return "bool"
        return ir_dtypes.from_numpy(np.dtype(dtype))
    return ir_dtypes.from_numpy(dtype)


def numpy_dtype(name: str) -> object:
    """What ``tile.dtype`` returns: a NumPy dtype, or the name of a dtype NumPy lacks
    ("tfloat32", "float8_e5m2_x4", ...)."""
    return name if name in _NAME_ONLY else ir_dtypes.to_numpy(name)


def is_float(name: str) -> bool:
    return ir_dtypes.is_float(name)


def is_packed(name: str) -> bool:
    return ir_dtypes.is_packed(name)


def promote(a: str, b: str) -> str:
    """Result dtype of a binary operation on tiles of dtypes ``a`` and ``b`` (NKI's "type
    promotion" rules, nki.api.shared):

    * equal dtypes stay; bool yields to the other operand;
    * float and integer: the float;
    * two floats: the wider, except (float16, bfloat16) -> float32 (neither holds the other) and
      two different fp8 types ((float8_e4m3, float8_e5m2)) -> bfloat16;
    * two integers: the smallest integer type holding both ranges, e.g. (int8, uint8) -> int16;
      pairs that would need 64 bits ((int32, uint32), (int8, uint32)) give float32, "since
      int64 isn't supported on the hardware".

    Packed types (``float8_e5m2_x4``) never reach an ALU: asking is an error.
    """
    for n in (a, b):
        if is_packed(n):
            raise TypeError(f"{n} is a packed dtype: arithmetic needs its elements (only data "
                            "movement and the MX instructions take packed tiles)")
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
        if all(records.BY_NKI[n].bits == 8 for n in pair):
            return "bfloat16"
        return a if _float_rank(a) >= _float_rank(b) else b
    res = np.promote_types(ir_dtypes.to_numpy(a), ir_dtypes.to_numpy(b))
    if res.itemsize > 4:
        return "float32"
    return ir_dtypes.from_numpy(res)


def _float_rank(name: str) -> tuple[int, int]:
    """Wider storage first, then more precision (tfloat32 below float32; the equal pairs are
    decided before this is asked)."""
    r = records.BY_NKI[name]
    return r.bits, r.precision or 0


def scalar_dtype(scalar: object) -> str:
    """A scalar operand's dtype: a NumPy scalar of an NKI dtype keeps it; a weakly typed scalar is
    "the widest dtype supported by hardware" (bool -> uint8, int -> int32, float -> float32)."""
    if isinstance(scalar, np.generic) and scalar.dtype in records.BY_NUMPY_NKI:
        return name_of(scalar.dtype)
    # A NumPy scalar of a type the engines lack (np.float64 from np.sqrt) is weakly typed too.
    if isinstance(scalar, (bool, np.bool_)):
        return "uint8"
    if isinstance(scalar, (int, np.integer)):
        return "int32"
    return "float32"


def promote_scalar(tile_dtype: str, scalar: object) -> str:
    """Result dtype of a tile with a scalar: the scalar takes part with ``scalar_dtype``, so
    ``(int8, 2) -> int32`` and ``(float16, 1.2) -> float32`` as NKI's rules say, while
    ``np.float16(1.2)`` keeps a float16 tile float16."""
    return promote(tile_dtype, scalar_dtype(scalar))
