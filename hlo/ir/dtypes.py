"""XLA primitive types and their NumPy dtypes.

One table, used by the IR (Shape.dtype), literal decoding and, through them, by the compiler. The
narrow float formats come from ml_dtypes, which is where NumPy gets bfloat16 and fp8 from.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

# XLA PrimitiveType name -> NumPy dtype, for every array element type NumPy can hold.
NUMPY_DTYPES: dict[str, np.dtype] = {
    "PRED": np.dtype(np.bool_),
    "S8": np.dtype(np.int8),
    "S16": np.dtype(np.int16),
    "S32": np.dtype(np.int32),
    "S64": np.dtype(np.int64),
    "U8": np.dtype(np.uint8),
    "U16": np.dtype(np.uint16),
    "U32": np.dtype(np.uint32),
    "U64": np.dtype(np.uint64),
    "F16": np.dtype(np.float16),
    "F32": np.dtype(np.float32),
    "F64": np.dtype(np.float64),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "C64": np.dtype(np.complex64),
    "C128": np.dtype(np.complex128),
    "F8E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "F8E4M3FN": np.dtype(ml_dtypes.float8_e4m3fn),
    "F8E4M3B11FNUZ": np.dtype(ml_dtypes.float8_e4m3b11fnuz),
    "F8E5M2FNUZ": np.dtype(ml_dtypes.float8_e5m2fnuz),
    "F8E4M3FNUZ": np.dtype(ml_dtypes.float8_e4m3fnuz),
    "F8E4M3": np.dtype(ml_dtypes.float8_e4m3),
    "F8E3M4": np.dtype(ml_dtypes.float8_e3m4),
    "F4E2M1FN": np.dtype(ml_dtypes.float4_e2m1fn),
    "F8E8M0FNU": np.dtype(ml_dtypes.float8_e8m0fnu),
    "S4": np.dtype(ml_dtypes.int4),
    "U4": np.dtype(ml_dtypes.uint4),
    "S2": np.dtype(ml_dtypes.int2),
    "U2": np.dtype(ml_dtypes.uint2),
    "S1": np.dtype(ml_dtypes.int1),
    "U1": np.dtype(ml_dtypes.uint1),
    "F6E3M2FN": np.dtype(ml_dtypes.float6_e3m2fn),
    "F6E2M3FN": np.dtype(ml_dtypes.float6_e2m3fn),
}

# Element types that are not arrays of numbers.
NON_ARRAY_TYPES = frozenset({"TUPLE", "TOKEN", "OPAQUE_TYPE", "BUFFER", "PRIMITIVE_TYPE_INVALID"})

_BY_DTYPE = {dt: name for name, dt in NUMPY_DTYPES.items()}


def numpy_dtype(element_type: str) -> np.dtype:
    """The NumPy dtype of an XLA element type; KeyError for tuples, tokens and unknown names."""
    return NUMPY_DTYPES[element_type]


def element_type_of(dtype: np.dtype | type) -> str:
    """The XLA element type name for a NumPy dtype (the inverse of `numpy_dtype`)."""
    return _BY_DTYPE[np.dtype(dtype)]


def bit_width(element_type: str) -> int:
    """Bits per element, sub-byte types included (s4 is 4, pred is 8 as XLA stores it)."""
    dt = NUMPY_DTYPES[element_type]
    return _SUB_BYTE_BITS.get(element_type, dt.itemsize * 8)


_SUB_BYTE_BITS = {"S4": 4, "U4": 4, "F4E2M1FN": 4, "S2": 2, "U2": 2, "S1": 1, "U1": 1, "F6E3M2FN": 6, "F6E2M3FN": 6}
