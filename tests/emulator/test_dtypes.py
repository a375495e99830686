"""The one dtype record (emulator/dtypes.py): every name is unique in its vocabulary, the tables
derived from it say what the record says, and `hlo`'s own table (it must stand alone) agrees."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from emulator import dtypes as records
from emulator.cost.tensor import FAST_DTYPES
from emulator.kernel_ir import dtypes as ir_dtypes
from emulator.program import dtypes as program_dtypes
from hlo.ir import dtypes as hlo_dtypes


def test_names_and_codes_are_unique_per_vocabulary():
    for field in ("hlo", "nki", "gpsimd_code"):
        names = [getattr(r, field) for r in records.RECORDS if getattr(r, field) is not None]
        assert len(names) == len(set(names)), field


def test_hlo_agrees_with_the_record():
    for name, r in records.BY_HLO.items():
        assert hlo_dtypes.numpy_dtype(name.upper()) == r.numpy, name
        width = hlo_dtypes.bit_width(name.upper())  # sub-byte types (f4, f6) are stored in a byte each
        assert width == r.bits or (width < 8 and r.bits == 8), name


def test_the_program_and_kernel_tables_are_the_records():
    assert program_dtypes.DTYPES == {r.hlo: r.numpy for r in records.RECORDS if r.hlo}
    assert ir_dtypes.DTYPES == {r.nki: r.numpy for r in records.RECORDS if r.nki}
    assert program_dtypes.name_of(np.float32) == "f32"
    assert program_dtypes.NARROW_FLOATS == {"f16", "bf16", "f8e5m2", "f8e4m3fn", "f8e4m3", "f8e8m0fnu", "f8e4m3fnuz",
                                            "f8e5m2fnuz", "f8e4m3b11fnuz", "f8e3m4", "f4e2m1fn"}
    assert program_dtypes.is_unsigned_int("u16") and not program_dtypes.is_float("s8")
    # float32 storage reads back as float32, never tfloat32; fp8 e4m3 is NKI's IEEE-like one
    assert ir_dtypes.from_numpy(np.float32) == "float32"
    assert ir_dtypes.to_numpy("tfloat32") == np.float32
    assert ir_dtypes.from_numpy(ml_dtypes.float8_e4m3) == "float8_e4m3"
    assert records.BY_NKI["float8_e4m3"].hlo == "f8e4m3"  # the same format in both vocabularies


def test_tensor_engine_rates_follow_from_the_record():
    assert {"bf16", "bfloat16", "tfloat32", "s8", "uint8", "f8e4m3fn"} <= FAST_DTYPES
    assert not {"f32", "float32", "s16", "int16", "bool", "pred"} & FAST_DTYPES


def test_gpsimd_codes_are_the_runtime_headers_scalar_types():
    import pathlib
    import re

    from emulator.gpsimd import abi
    from emulator.gpsimd.call import NUMPY_DTYPES

    header = pathlib.Path(abi.__file__).parent / "include" / "torch" / "torch.h"
    enum = dict(re.findall(r"(\w+) = (\d+)", re.search(r"enum class ScalarType[^{]*{([^}]*)}",
                                                        header.read_text()).group(1)))
    c10 = {"Byte": "uint8", "Char": "int8", "Short": "int16", "Int": "int32", "Long": "int64",
           "Half": "float16", "Float": "float32", "BFloat16": "bfloat16"}
    assert {c10[k]: int(v) for k, v in enum.items()} == {
        n: d.code for n, d in abi.DTYPES.items()}
    assert NUMPY_DTYPES == {n: r.numpy for n, r in records.BY_GPSIMD.items()}
    assert all(abi.DTYPES[n].itemsize == NUMPY_DTYPES[n].itemsize for n in abi.DTYPES)
