"""Element types of the instruction set and their NumPy dtypes.

Why a table of our own: the emulator must not import `hlo`, yet the artifact names element types
in its manifest and program. The names are XLA's, lower-cased ("f32", "bf16", "pred"), so that a
reader of an artifact and of the HLO it came from sees one vocabulary.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

DTYPES: dict[str, np.dtype] = {
    "pred": np.dtype(np.bool_),
    "s8": np.dtype(np.int8), "s16": np.dtype(np.int16), "s32": np.dtype(np.int32), "s64": np.dtype(np.int64),
    "u8": np.dtype(np.uint8), "u16": np.dtype(np.uint16), "u32": np.dtype(np.uint32), "u64": np.dtype(np.uint64),
    "f16": np.dtype(np.float16), "f32": np.dtype(np.float32), "f64": np.dtype(np.float64),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "c64": np.dtype(np.complex64), "c128": np.dtype(np.complex128),
    "f8e5m2": np.dtype(ml_dtypes.float8_e5m2), "f8e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
}

#: Non-array value kinds a program slot can hold.
TOKEN = "token"
TUPLE = "tuple"

_NAMES = {dt: name for name, dt in DTYPES.items()}

#: Narrow float types whose math the executor does in f32 and rounds back, as XLA:CPU does.
NARROW_FLOATS = frozenset({"f16", "bf16", "f8e5m2", "f8e4m3fn"})


def dtype_of(name: str) -> np.dtype:
    """The NumPy dtype of an element type name; KeyError for unknown names."""
    return DTYPES[name]


def name_of(dtype: np.dtype | type) -> str:
    """The element type name of a NumPy dtype; KeyError if the instruction set has none."""
    return _NAMES[np.dtype(dtype)]


def is_float(name: str) -> bool:
    return name in ("f16", "f32", "f64", "bf16", "f8e5m2", "f8e4m3fn")


def is_signed_int(name: str) -> bool:
    return name in ("s8", "s16", "s32", "s64")


def is_unsigned_int(name: str) -> bool:
    return name in ("u8", "u16", "u32", "u64")


def is_complex(name: str) -> bool:
    return name in ("c64", "c128")
