"""``NKI_PRECISE_FP``: how on-chip tiles of low-precision float types are stored.

AWS's NKI simulator stores ``bfloat16`` and ``float8`` tensors in those types by default
(``NKI_PRECISE_FP=1``), so every write rounds as the hardware does. With ``NKI_PRECISE_FP=0`` it
stores them as float32 instead, "eliminating rounding and truncation effects", to tell an
algorithmic bug from precision loss; it was also the behaviour of simulators before NKI 0.3.0,
which some of AWS's beta 1 examples still assume (docs/nki.md). The emulator honours the same
variable for NKI kernels: with ``0``, the SBUF and PSUM tiles of those types are stored as
float32. HBM tensors keep their types (a kernel's outputs are what its caller declared), and so
do tiles whose bits a kernel reinterprets (bit-cast copies), whose layout is their type's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from emulator import dtypes as records
from emulator import machine
from emulator.kernel_ir import KernelIR, dtypes, walk_instructions

ENV = "NKI_PRECISE_FP"

#: NKI types stored as float32 when precision is off: the narrow floats ml_dtypes provides
#: (not the MX scale type, an exponent code, nor packed words).
LOW_PRECISION = frozenset(
    name for name, r in records.BY_NKI.items()
    if r.kind == records.FLOAT and r.ml_dtype and name != "float8_e8m0fnu")

_F32 = np.dtype(np.float32)


class PrecisionSettingError(ValueError):
    """``NKI_PRECISE_FP`` holds something other than 0 or 1."""


def precise_fp(environ: Mapping[str, str] | None = None) -> bool:
    """The setting: True (the default, as the SDK's) unless the variable is ``0``."""
    raw = (os.environ if environ is None else environ).get(ENV, "").strip()
    if raw in ("", "1"):
        return True
    if raw == "0":
        return False
    raise PrecisionSettingError(f"{ENV}={raw!r}: use 1 (low-precision types stored as such, the "
                                "default) or 0 (stored as float32)")


def storage_dtypes(kernel: KernelIR, precise: bool) -> dict[str, np.dtype]:
    """Tensor name -> the NumPy dtype its storage has under the setting."""
    out = {name: dtypes.to_numpy(t.dtype) for name, t in kernel.tensors.items()}
    if precise:
        return out
    raw = set()  # tiles whose bits are reinterpreted keep their type's layout
    for ins in walk_instructions(kernel.body):
        if ins.attrs.get("bitcast"):
            raw.update(s.tensor for s in ins.srcs if hasattr(s, "tensor"))
            if ins.dst is not None:
                raw.add(ins.dst.tensor)
    for name, t in kernel.tensors.items():
        if t.dtype in LOW_PRECISION and t.memory in machine.ON_CHIP and name not in raw:
            out[name] = _F32
    return out
