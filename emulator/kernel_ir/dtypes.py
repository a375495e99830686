"""The dtype names the kernel IR uses, and the NumPy (ml_dtypes) dtype that stores each.

The IR names dtypes by string so that its serialised form needs no NumPy; the names and their
storage come from the dtype record (emulator/dtypes.py). ``tfloat32`` has no NumPy type: it is
stored as float32 (the engines round it on the fly, which the emulator does not model).
"""

from __future__ import annotations

import numpy as np

from emulator import dtypes as records

#: NKI name -> storage, from the one dtype record (emulator/dtypes.py).
DTYPES: dict[str, np.dtype] = {name: r.numpy for name, r in records.BY_NKI.items()}

FLOAT_NAMES = records.nki_names(lambda r: r.kind == records.FLOAT)
INT_NAMES = records.nki_names(lambda r: r.kind in (records.INT, records.UINT))
#: Packed types (float8_e5m2_x4 ...): moved and bit-cast, never computed on by the ALUs.
PACKED_NAMES = records.nki_names(lambda r: r.kind == records.PACKED)


class UnknownDtypeError(TypeError):
    """A dtype the NKI reference does not list (e.g. float64 or int64)."""


def to_numpy(name: str) -> np.dtype:
    """Storage dtype for an IR dtype name."""
    try:
        return DTYPES[name]
    except KeyError:
        raise UnknownDtypeError(f"unknown kernel dtype {name!r}; known: {sorted(DTYPES)}") from None


def from_numpy(dtype: object) -> str:
    """IR dtype name for a NumPy dtype (float32 maps to "float32", never "tfloat32")."""
    dt = np.dtype(dtype)
    try:
        return records.BY_NUMPY_NKI[dt].nki
    except KeyError:
        raise UnknownDtypeError(
            f"dtype {dt} is not a NeuronCore dtype; use one of {sorted(DTYPES)}") from None


def itemsize(name: str) -> int:
    """Bytes per element of an IR dtype."""
    return to_numpy(name).itemsize


def is_float(name: str) -> bool:
    return name in FLOAT_NAMES


def is_packed(name: str) -> bool:
    return name in PACKED_NAMES
