"""The kernel descriptor's dtype conversions are read off the one dtype record: HLO <-> NKI and
HLO <-> GpSimd for exactly the types both sides have, and refusals naming the type otherwise."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from emulator import dtypes as records
from neuron_customcall.kernels import dtypes


def test_conversions_are_the_records():
    assert dtypes.NKI_TO_HLO == {r.nki: r.hlo for r in records.RECORDS if r.nki and r.hlo}
    assert dtypes.GPSIMD_TO_HLO == {r.gpsimd: r.hlo for r in records.RECORDS if r.gpsimd and r.hlo}
    assert dtypes.nki_to_hlo("bfloat16") == "bf16" and dtypes.gpsimd_to_hlo("int64") == "s64"
    assert dtypes.hlo_to_gpsimd("f16") == "float16"
    assert dtypes.hlo_name_of(np.float32) == "f32"
    assert dtypes.hlo_name_of(ml_dtypes.float8_e4m3fn) == "f8e4m3fn"
    assert dtypes.nki_to_hlo("float8_e4m3") == "f8e4m3"  # IEEE-like e4m3 is XLA's F8E4M3


@pytest.mark.parametrize("call, arg", [
    (dtypes.nki_to_hlo, "tfloat32"),          # stored as f32, not a framework type
    (dtypes.nki_to_hlo, "float4_e2m1fn_x4"),  # a packed NKI type: no HLO twin
    (dtypes.hlo_to_gpsimd, "u16"),
    (dtypes.hlo_name_of, ml_dtypes.float6_e2m3fn),  # no program runs it
])
def test_types_one_side_lacks_are_refused_by_name(call, arg):
    with pytest.raises(dtypes.KernelDtypeError):
        call(arg)
