"""Element type names across the kernel worlds: HLO (the descriptor's vocabulary), the NKI kernel
IR, the GpSimd runtime and NumPy.

Why: a kernel descriptor is checked against the HLO instruction it sits in, so it names dtypes as
HLO does ("f32", "bf16"); the NKI IR and the GpSimd runtime each have their own names. The
conversions are read off the one dtype record (emulator/dtypes.py), so the three never drift.
"""
from __future__ import annotations

import numpy as np

from emulator import dtypes as records
from emulator.program.dtypes import DTYPES as HLO_DTYPES  # noqa: F401  (HLO name -> NumPy, for the adapters)

#: NKI IR dtype name -> HLO element type name, from the dtype record (emulator/dtypes.py).
#: float8_e4m3 (IEEE-like, with infinities) has no HLO twin among the emulator's types, and
#: tfloat32 is stored as f32 but is not a framework type.
NKI_TO_HLO: dict[str, str] = {r.nki: r.hlo for r in records.RECORDS if r.nki and r.hlo}
HLO_TO_NKI: dict[str, str] = {v: k for k, v in NKI_TO_HLO.items()}

#: GpSimd runtime dtype name (emulator.gpsimd.abi.DTYPES) -> HLO element type name.
GPSIMD_TO_HLO: dict[str, str] = {r.gpsimd: r.hlo for r in records.RECORDS if r.gpsimd and r.hlo}
HLO_TO_GPSIMD: dict[str, str] = {v: k for k, v in GPSIMD_TO_HLO.items()}


class KernelDtypeError(TypeError):
    """A dtype a kernel signature can not carry."""


def hlo_name_of(dtype: object) -> str:
    """The HLO element type name of a NumPy (or ml_dtypes) dtype."""
    dt = np.dtype(dtype)
    r = records.BY_NUMPY_HLO.get(dt)
    if r is None:
        raise KernelDtypeError(f"dtype {dt} has no HLO element type")
    return r.hlo


def _lookup(table: dict[str, str], name: str, what: str) -> str:
    try:
        return table[name]
    except KeyError:
        raise KernelDtypeError(f"{what} {name!r} has no counterpart; known: {sorted(table)}") from None


def nki_to_hlo(name: str) -> str:
    """HLO name of an NKI dtype that may cross a framework boundary."""
    return _lookup(NKI_TO_HLO, name, "NKI dtype")


def gpsimd_to_hlo(name: str) -> str:
    return _lookup(GPSIMD_TO_HLO, name, "GpSimd dtype")


def hlo_to_gpsimd(name: str) -> str:
    return _lookup(HLO_TO_GPSIMD, name, "element type (as a GpSimd dtype)")
