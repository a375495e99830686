"""Moving tensor data between torch and NumPy without losing dtypes NumPy lacks natively.

Why: torch's `.numpy()` refuses bfloat16 (and the fp8 types); the emulator speaks NumPy with
ml_dtypes. The bits are reinterpreted through a same-width integer view, never converted.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import torch

from emulator.kernel_exec import buffers
from neuron_customcall import torch_dtypes

# torch dtypes whose NumPy twin comes from ml_dtypes, with an integer type of the same width.
_VIA_BITS: dict[torch.dtype, tuple[np.dtype, torch.dtype]] = torch_dtypes.via_bits()
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


# Element types torch_xla exports through DLPack (its PrimitiveTypeToDLDataType); fp8 has none.
_DLPACK_DTYPES = frozenset({
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
    torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128,
})
_DLPACK_NUMPY = frozenset(
    [_VIA_BITS[t][0] for t in _DLPACK_DTYPES if t in _VIA_BITS]
    + [torch.empty((), dtype=t).numpy().dtype for t in _DLPACK_DTYPES if t not in _VIA_BITS])


@functools.cache
def _host_memory_device() -> bool:
    """Whether torch_xla's PJRT device keeps its buffers in host memory (PJRT_DEVICE=CPU)."""
    import torch_xla.runtime as xr

    return xr.device_type() == "CPU"


def device_data_to_numpy(data: Sequence[torch.Tensor]) -> list[np.ndarray]:
    """The values of XLA device-data tensors (the `_get_tensors_xla_device_data_node` kind: each
    holds a live buffer) as read-only NumPy arrays, in order.

    Why not `_xla_get_cpu_tensors`: it copies every buffer out through an XLA literal, 35-45 ms
    for the 46 MB of weights of a 784-4096-2048-10 MLP, on every run of the graph. On the CPU
    PJRT device a buffer is host memory already, so each array is a view of it through DLPack
    (the capsule holds a reference that keeps the buffer alive as long as the array). Read-only,
    because writing to it would change the XLA tensor behind torch_xla's back. Types DLPack can
    not carry, and other devices, take the copying transfer (one batched call).
    """
    import torch.utils.dlpack
    import torch_xla

    x = torch_xla._XLAC
    out: list[np.ndarray | None] = [None] * len(data)
    rest = list(range(len(data)))
    if _host_memory_device():
        rest = []
        for k, t in enumerate(data):
            if t.dtype not in _DLPACK_DTYPES:
                rest.append(k)
                continue
            out[k] = to_numpy(torch.utils.dlpack.from_dlpack(x._to_dlpack(t)))
    if rest:
        for k, value in zip(rest, x._xla_get_cpu_tensors([data[k] for k in rest])):
            out[k] = to_numpy(value)
    for a in out:
        a.flags.writeable = False  # type: ignore[union-attr]
    return out  # type: ignore[return-value]


#: XLA:CPU refuses a view of memory less aligned than this ("not aligned to 64 bytes").
_XLA_CPU_ALIGN = 64
#: Smaller arrays are copied: the batched copy costs about 5 us an array up to 64 KB, a view 3.3
#: us, and a view of an unaligned array (most NumPy arrays are 16-byte aligned) 7 us.
_VIEW_MIN_BYTES = 64 * 1024


@functools.cache
def _view_device() -> str:
    """The XLA device a DLPack view of host memory lands on (a CPU DLPack tensor names device 0)."""
    import torch_xla

    return str(torch_xla.device(0))


def _aligned(a: np.ndarray) -> np.ndarray:
    """`a` itself when it is C-contiguous, writeable and 64-byte aligned, else such a copy."""
    a = _contiguous(np.asarray(a))
    if a.flags.writeable and a.ctypes.data % _XLA_CPU_ALIGN == 0:
        return a
    out = buffers.aligned_empty(a.shape, a.dtype, _XLA_CPU_ALIGN, pooled=False)
    out[...] = a
    return out


def numpy_to_device_data(values: Sequence[np.ndarray], devices: Sequence[str]) -> list[torch.Tensor]:
    """XLA device-data tensors holding `values` on `devices` (device strings), in order. The
    arrays are handed over: the caller must not write to them afterwards.

    Why not only `_xla_tensors_from_aten`: it copies each array into a new buffer, 23 ms for one
    4096x2048 float32 weight. On the CPU PJRT device the buffer can be the array's own memory (a
    DLPack view, which keeps the array alive as long as the buffer), about 3 us whatever the size.
    Arrays XLA:CPU would refuse (not 64-byte aligned) are first copied into aligned memory; small
    arrays (below `_VIEW_MIN_BYTES`), types DLPack can not carry and other devices take the
    copying transfer (one call).
    """
    import torch.utils.dlpack
    import torch_xla

    x = torch_xla._XLAC
    out: list[torch.Tensor | None] = [None] * len(values)
    rest = list(range(len(values)))
    if _host_memory_device():
        rest = []
        for k, (v, device) in enumerate(zip(values, devices)):
            a = np.asarray(v)
            if a.nbytes < _VIEW_MIN_BYTES or a.dtype not in _DLPACK_NUMPY or device != _view_device():
                rest.append(k)
                continue
            out[k] = x._from_dlpack(torch.utils.dlpack.to_dlpack(from_numpy(_aligned(a))))
    if rest:
        for k, d in zip(rest, x._xla_tensors_from_aten([from_numpy(np.asarray(values[k])) for k in rest],
                                                        [devices[k] for k in rest])):
            out[k] = d
    return out  # type: ignore[return-value]
