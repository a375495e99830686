"""Moving tensor data between torch and NumPy without losing dtypes NumPy lacks natively.

Why: torch's `.numpy()` refuses bfloat16 (and the fp8 types); the emulator speaks NumPy with
ml_dtypes. The bits are reinterpreted through a same-width integer view, never converted.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import torch

# torch dtypes whose NumPy twin comes from ml_dtypes, with an integer type of the same width.
_VIA_BITS: dict[torch.dtype, tuple[np.dtype, torch.dtype]] = {
    torch.bfloat16: (np.dtype(ml_dtypes.bfloat16), torch.int16),
    torch.float8_e4m3fn: (np.dtype(ml_dtypes.float8_e4m3fn), torch.uint8),
    torch.float8_e5m2: (np.dtype(ml_dtypes.float8_e5m2), torch.uint8),
}
_BY_NUMPY = {np_dt: (torch_dt, bits) for torch_dt, (np_dt, bits) in _VIA_BITS.items()}


def _contiguous(a: np.ndarray) -> np.ndarray:
    # Not np.ascontiguousarray: it turns a 0-d array into a 1-d one.
    return a if a.flags.c_contiguous else a.copy(order="C")


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A C-contiguous NumPy array with the values of CPU tensor `t` (a view where possible)."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    special = _VIA_BITS.get(t.dtype)
    if special is not None:
        np_dtype, bits = special
        return t.contiguous().view(bits).numpy().view(np_dtype)
    return _contiguous(t.resolve_conj().resolve_neg().numpy())


def from_numpy(a: np.ndarray) -> torch.Tensor:
    """A CPU tensor holding `a`'s values (sharing its memory where the layout allows)."""
    a = _contiguous(np.asarray(a))
    if not a.flags.writeable:  # torch warns on read-only memory; the copy is the honest answer
        a = a.copy()
    special = _BY_NUMPY.get(a.dtype)
    if special is not None:
        torch_dtype, bits = special
        return torch.from_numpy(a.view(torch.empty((), dtype=bits).numpy().dtype)).view(torch_dtype)
    return torch.from_numpy(a)
