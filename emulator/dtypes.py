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
#: Several narrow floats packed into one stored word (NKI's ``float8_e5m2_x4`` ...): only data
#: movement and the MX instructions read them, never the ALUs.
PACKED = "packed"


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
    #: Packed types: the element type's NKI name and how many elements one stored word holds.
    packs: str | None = None
    lanes: int = 1

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
    # Sub-byte integers, HLO only (one per byte, as ml_dtypes stores them): the compiler computes
    # them in 8 bits (neuron_customcall/compiler/subbyte.py), so a program holds them only at its
    # inputs and outputs.
    DTypeRecord(_d(ml_dtypes.int4), INT, hlo="s4"),
    DTypeRecord(_d(ml_dtypes.uint4), UINT, hlo="u4"),
    DTypeRecord(_d(ml_dtypes.int2), INT, hlo="s2"),
    DTypeRecord(_d(ml_dtypes.uint2), UINT, hlo="u2"),
    DTypeRecord(_d(ml_dtypes.float8_e5m2), FLOAT, hlo="f8e5m2", nki="float8_e5m2", precision=3),
    DTypeRecord(_d(ml_dtypes.float8_e4m3fn), FLOAT, hlo="f8e4m3fn", nki="float8_e4m3fn",
                precision=4),
    # NKI's float8_e4m3 is the IEEE-like format (with infinities), XLA's F8E4M3.
    DTypeRecord(_d(ml_dtypes.float8_e4m3), FLOAT, hlo="f8e4m3", nki="float8_e4m3", precision=4),
    # The MX scale type: an exponent only (2**(e-127)), unsigned, 0xFF is NaN.
    DTypeRecord(_d(ml_dtypes.float8_e8m0fnu), FLOAT, hlo="f8e8m0fnu", nki="float8_e8m0fnu", precision=1),
    # The rest of XLA's narrow floats (PrimitiveType) that ml_dtypes stores: HLO only, no NKI name.
    # fnuz: finite, no negative zero, one NaN; b11: exponent bias 11. Not f6e2m3fn/f6e3m2fn:
    # jaxlib 0.10.2's XLA:CPU compiles no program with them, so there is no semantics to match.
    DTypeRecord(_d(ml_dtypes.float8_e4m3fnuz), FLOAT, hlo="f8e4m3fnuz", precision=4),
    DTypeRecord(_d(ml_dtypes.float8_e5m2fnuz), FLOAT, hlo="f8e5m2fnuz", precision=3),
    DTypeRecord(_d(ml_dtypes.float8_e4m3b11fnuz), FLOAT, hlo="f8e4m3b11fnuz", precision=4),
    DTypeRecord(_d(ml_dtypes.float8_e3m4), FLOAT, hlo="f8e3m4", precision=5),
    DTypeRecord(_d(ml_dtypes.float4_e2m1fn), FLOAT, hlo="f4e2m1fn", precision=2),
    # nc_matmul_mx's 4-packed types, as NKI's reference says: four float8 values in a 32-bit word,
    # four float4_e2m1fn values in 16 bits; element i sits at bits [i*w, (i+1)*w) (little
    # endian, so a uint8 [.., 4] array viewed as the packed type packs its last axis).
    DTypeRecord(_d(np.uint32), PACKED, nki="float8_e5m2_x4", packs="float8_e5m2", lanes=4),
    DTypeRecord(_d(np.uint32), PACKED, nki="float8_e4m3fn_x4", packs="float8_e4m3fn", lanes=4),
    DTypeRecord(_d(np.uint16), PACKED, nki="float4_e2m1fn_x4", packs="float4_e2m1fn", lanes=4),
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

#: Element types of packed records that are not NKI dtypes of their own (float4_e2m1fn exists
#: only inside float4_e2m1fn_x4).
_ELEMENTS: dict[str, np.dtype] = {"float4_e2m1fn": _d(ml_dtypes.float4_e2m1fn)}

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
        if r.kind == PACKED:
            continue  # never what plain storage is read as
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


def _element(r: DTypeRecord) -> np.dtype:
    if r.kind != PACKED:
        raise TypeError(f"{r.nki or r.hlo} is not a packed dtype")
    return BY_NKI[r.packs].numpy if r.packs in BY_NKI else _ELEMENTS[r.packs]


def unpack(words: np.ndarray, r: DTypeRecord) -> np.ndarray:
    """The elements of packed ``words`` (stored as ``r.numpy``) as float32, with one more trailing
    axis of ``r.lanes`` elements: element ``i`` of a word is its bits ``[i*w, (i+1)*w)``."""
    el = _element(r)
    width = r.bits // r.lanes
    words = np.asarray(words, dtype=r.numpy).astype(np.uint32)
    shifts = np.arange(r.lanes, dtype=np.uint32) * width
    codes = ((words[..., None] >> shifts) & ((1 << width) - 1)).astype(np.uint8)
    return codes.view(el).astype(np.float32)


def pack(values: np.ndarray, r: DTypeRecord) -> np.ndarray:
    """Inverse of ``unpack``: values ``[..., lanes]`` rounded to the element type, packed into
    words of ``r.numpy``."""
    el = _element(r)
    values = np.asarray(values)
    if values.shape[-1:] != (r.lanes,):
        raise ValueError(f"packing {r.nki} needs a last axis of {r.lanes}, got {values.shape}")
    width = r.bits // r.lanes
    codes = values.astype(np.float32).astype(el).view(np.uint8).astype(np.uint32)
    codes &= (1 << width) - 1
    shifts = np.arange(r.lanes, dtype=np.uint32) * width
    return np.bitwise_or.reduce(codes << shifts, axis=-1).astype(r.numpy)
