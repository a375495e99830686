"""Element types of the instruction set and their NumPy dtypes.

Why not `hlo`'s table: the emulator must not import `hlo`, yet the artifact names element types
in its manifest and program. The names are XLA's, lower-cased ("f32", "bf16", "pred"), so that a
reader of an artifact and of the HLO it came from sees one vocabulary; they come from the one
dtype record (emulator/dtypes.py), and a test checks them against `hlo`'s.
"""
from __future__ import annotations

import numpy as np

from emulator import dtypes as records

#: HLO name -> NumPy dtype, from the one dtype record (emulator/dtypes.py).
DTYPES: dict[str, np.dtype] = {name: r.numpy for name, r in records.BY_HLO.items()}

#: Non-array value kinds a program slot can hold.
TOKEN = "token"
TUPLE = "tuple"

_NAMES = {dt: r.hlo for dt, r in records.BY_NUMPY_HLO.items()}

#: Narrow float types whose math the executor does in f32 and rounds back, as XLA:CPU does.
NARROW_FLOATS = records.hlo_names(lambda r: r.kind == records.FLOAT and r.bits < 32)
_FLOATS = records.hlo_names(lambda r: r.kind == records.FLOAT)
_SIGNED = records.hlo_names(lambda r: r.kind == records.INT)
_UNSIGNED = records.hlo_names(lambda r: r.kind == records.UINT)
_COMPLEX = records.hlo_names(lambda r: r.kind == records.COMPLEX)


def dtype_of(name: str) -> np.dtype:
    """The NumPy dtype of an element type name; KeyError for unknown names."""
    return DTYPES[name]


def name_of(dtype: np.dtype | type) -> str:
    """The element type name of a NumPy dtype; KeyError if the instruction set has none."""
    return _NAMES[np.dtype(dtype)]


def is_float(name: str) -> bool:
    return name in _FLOATS


def is_signed_int(name: str) -> bool:
    return name in _SIGNED


def is_unsigned_int(name: str) -> bool:
    return name in _UNSIGNED


def is_complex(name: str) -> bool:
    return name in _COMPLEX
