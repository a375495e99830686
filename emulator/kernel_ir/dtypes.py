"""The dtype names the kernel IR uses, and the NumPy (ml_dtypes) dtype that stores each.

The IR names dtypes by string so that its serialised form needs no NumPy; this table is the one
place that maps a name to storage. ``tfloat32`` has no NumPy type: it is stored as float32 (the
engines round it on the fly, which the emulator does not model).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

DTYPES: dict[str, np.dtype] = {
    "bool": np.dtype(np.bool_),
    "uint8": np.dtype(np.uint8),
    "int8": np.dtype(np.int8),
    "uint16": np.dtype(np.uint16),
    "int16": np.dtype(np.int16),
    "uint32": np.dtype(np.uint32),
    "int32": np.dtype(np.int32),
    "float8_e4m3": np.dtype(ml_dtypes.float8_e4m3),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "tfloat32": np.dtype(np.float32),
    "float32": np.dtype(np.float32),
}

FLOAT_NAMES = frozenset(
    {"float8_e4m3", "float8_e5m2", "float16", "bfloat16", "tfloat32", "float32"})
INT_NAMES = frozenset({"uint8", "int8", "uint16", "int16", "uint32", "int32"})


class UnknownDtypeError(TypeError):
    """A dtype the NKI reference does not list (e.g. float64 or int64)."""


def to_numpy(name: str) -> np.dtype:
    """Storage dtype for an IR dtype name."""
    try:
        return DTYPES[name]
    except KeyError:
        raise UnknownDtypeError(f"unknown kernel dtype {name!r}; known: {sorted(DTYPES)}") from None


_BY_NUMPY: dict[np.dtype, str] = {}
for _name, _dt in DTYPES.items():
    if _name != "tfloat32":  # float32 storage means float32, never tfloat32
        _BY_NUMPY[_dt] = _name


def from_numpy(dtype: object) -> str:
    """IR dtype name for a NumPy dtype (float32 maps to "float32", never "tfloat32")."""
    dt = np.dtype(dtype)
    try:
        return _BY_NUMPY[dt]
    except KeyError:
        raise UnknownDtypeError(
            f"dtype {dt} is not a NeuronCore dtype; use one of {sorted(DTYPES)}") from None


def itemsize(name: str) -> int:
    """Bytes per element of an IR dtype."""
    return to_numpy(name).itemsize


def is_float(name: str) -> bool:
    return name in FLOAT_NAMES
