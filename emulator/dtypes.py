"""Element types: one record per type, naming it in every vocabulary the emulator meets.

A value crosses four naming schemes on its way through: the HLO graph ("f32", XLA's element
types, lower-cased as the artifact writes them), the NKI kernel IR ("float32"), the GpSimd runtime
(the c10 ScalarType code a C++ kernel sees, and a name) and NumPy (the storage). Each row below
says all of them at once; every other dtype table in the emulator and the plugin is derived from
``RECORDS`` (``hlo`` keeps its own, since it must stand alone, and a test checks that the two
agree), so that adding a dtype is one row here plus the tests of what it enables.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

BOOL = "bool"
INT = "int"
UINT = "uint"
FLOAT = "float"
COMPLEX = "complex"


@dataclass(frozen=True)
class DTypeRecord:
    """One element type. A ``None`` name: the type does not exist in that vocabulary."""

    #: NumPy (ml_dtypes) storage.
    numpy: np.dtype
    kind: str
    #: XLA element type, lower case ("f32"), as the artifact and the kernel descriptor name it.
    hlo: str | None = None
    #: NKI's name, which the kernel IR uses ("float32").
    nki: str | None = None
    #: The GpSimd runtime's c10 ScalarType code (its name there is the NumPy name).
    gpsimd_code: int | None = None
    #: Significand bits including the implicit one (floats: what a value keeps of its precision).
    precision: int | None = None

    @property
    def itemsize(self) -> int:
        """Bytes per stored element."""
        return self.numpy.itemsize

    @property
    def bits(self) -> int:
        return self.numpy.itemsize * 8

    @property
    def ml_dtype(self) -> bool:
        """Stored as an ml_dtypes type (bfloat16, fp8): NumPy knows it only as a user-defined
        dtype, which some consumers (torch's ``.numpy()``, memoryviews) refuse."""
        return self.numpy.isbuiltin != 1

    @property
    def gpsimd(self) -> str | None:
        """The GpSimd runtime's name ("float32"), when it has the type."""
        return self.numpy.name if self.gpsimd_code is not None else None


def _d(t: object) -> np.dtype:
    return np.dtype(t)


#: Every element type, once.
RECORDS: tuple[DTypeRecord, ...] = (
    DTypeRecord(_d(np.bool_), BOOL, hlo="pred", nki="bool"),
    DTypeRecord(_d(np.int8), INT, hlo="s8", nki="int8", gpsimd_code=1),
    DTypeRecord(_d(np.int16), INT, hlo="s16", nki="int16", gpsimd_code=2),
    DTypeRecord(_d(np.int32), INT, hlo="s32", nki="int32", gpsimd_code=3),
    DTypeRecord(_d(np.int64), INT, hlo="s64", gpsimd_code=4),
    DTypeRecord(_d(np.uint8), UINT, hlo="u8", nki="uint8", gpsimd_code=0),
    DTypeRecord(_d(np.uint16), UINT, hlo="u16", nki="uint16"),
    DTypeRecord(_d(np.uint32), UINT, hlo="u32", nki="uint32"),
    DTypeRecord(_d(np.uint64), UINT, hlo="u64"),
    DTypeRecord(_d(ml_dtypes.float8_e5m2), FLOAT, hlo="f8e5m2", nki="float8_e5m2", precision=3),
    DTypeRecord(_d(ml_dtypes.float8_e4m3fn), FLOAT, hlo="f8e4m3fn", precision=4),
    # NKI's float8_e4m3 is the IEEE-like format (with infinities); the emulator's HLO side has
    # only the finite-only e4m3fn.
    DTypeRecord(_d(ml_dtypes.float8_e4m3), FLOAT, nki="float8_e4m3", precision=4),
    DTypeRecord(_d(np.float16), FLOAT, hlo="f16", nki="float16", gpsimd_code=5, precision=11),
    DTypeRecord(_d(ml_dtypes.bfloat16), FLOAT, hlo="bf16", nki="bfloat16", gpsimd_code=15,
                precision=8),
    # tfloat32 has no NumPy type: stored as float32 (the engines round it on the fly, which the
    # emulator does not model), so float32 storage always reads back as float32.
    DTypeRecord(_d(np.float32), FLOAT, nki="tfloat32", precision=11),
    DTypeRecord(_d(np.float32), FLOAT, hlo="f32", nki="float32", gpsimd_code=6, precision=24),
    DTypeRecord(_d(np.float64), FLOAT, hlo="f64", precision=53),
    DTypeRecord(_d(np.complex64), COMPLEX, hlo="c64"),
    DTypeRecord(_d(np.complex128), COMPLEX, hlo="c128"),
)

BY_HLO: dict[str, DTypeRecord] = {r.hlo: r for r in RECORDS if r.hlo}
BY_NKI: dict[str, DTypeRecord] = {r.nki: r for r in RECORDS if r.nki}
BY_GPSIMD: dict[str, DTypeRecord] = {r.gpsimd: r for r in RECORDS if r.gpsimd}


def _by_numpy(vocabulary: str) -> dict[np.dtype, DTypeRecord]:
    """NumPy dtype -> record, among the records named in ``vocabulary``; where two records share
    a storage (tfloat32 and float32), the one with an HLO name wins: storage is read as the
    type it most plainly is."""
    out: dict[np.dtype, DTypeRecord] = {}
    for r in RECORDS:
        if getattr(r, vocabulary) is None:
            continue
        if r.numpy not in out or (r.hlo and not out[r.numpy].hlo):
            out[r.numpy] = r
    return out


BY_NUMPY_HLO = _by_numpy("hlo")
BY_NUMPY_NKI = _by_numpy("nki")
BY_NUMPY_GPSIMD = _by_numpy("gpsimd")


def hlo_names(pred=lambda r: True) -> frozenset[str]:
    """HLO names of the records ``pred`` accepts."""
    return frozenset(r.hlo for r in RECORDS if r.hlo and pred(r))


def nki_names(pred=lambda r: True) -> frozenset[str]:
    """NKI names of the records ``pred`` accepts."""
    return frozenset(r.nki for r in RECORDS if r.nki and pred(r))
