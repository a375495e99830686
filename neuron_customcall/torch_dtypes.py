"""The torch side of the dtype record: which torch dtype is which element type.

One table for every torch adapter (torch eager C++ ops in ``cpp/torch_ops.py``, torch_xla
custom-calls and tensor transfer in ``torch_xla/``): each torch dtype names its row of the dtype
record (emulator/dtypes.py) by HLO name, and everything else (GpSimd names, NumPy storage, the
integer type of the same width that carries ml_dtypes values across) is read off that row.
Imported only by torch adapters (it imports torch).
"""

from __future__ import annotations

import numpy as np
import torch

from emulator import dtypes as records

#: torch dtype -> its element type record.
TORCH: dict[torch.dtype, records.DTypeRecord] = {
    t: records.BY_HLO[name] for t, name in (
        (torch.bool, "pred"), (torch.uint8, "u8"), (torch.int8, "s8"), (torch.int16, "s16"),
        (torch.uint16, "u16"), (torch.int32, "s32"), (torch.uint32, "u32"), (torch.int64, "s64"),
        (torch.uint64, "u64"), (torch.float16, "f16"), (torch.bfloat16, "bf16"),
        (torch.float32, "f32"), (torch.float64, "f64"), (torch.complex64, "c64"),
        (torch.complex128, "c128"), (torch.float8_e5m2, "f8e5m2"),
        (torch.float8_e4m3fn, "f8e4m3fn"),
    )
}
BY_HLO: dict[str, torch.dtype] = {r.hlo: t for t, r in TORCH.items()}
BY_GPSIMD: dict[str, torch.dtype] = {r.gpsimd: t for t, r in TORCH.items() if r.gpsimd}

#: Unsigned/signed integer torch dtype of each width: how values of a type torch can not hand
#: to NumPy directly travel as bits.
_BITS = {1: torch.uint8, 2: torch.int16}


def via_bits() -> dict[torch.dtype, tuple[np.dtype, torch.dtype]]:
    """torch dtypes whose NumPy storage is an ml_dtypes type (``.numpy()`` refuses them), with
    the integer torch dtype of the same width their bits travel as."""
    return {t: (r.numpy, _BITS[r.itemsize]) for t, r in TORCH.items()
            if r.ml_dtype}
