"""Turning op arguments into the runtime's ``ncc_arg`` array, on the host and in the worker."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Sequence, Union

from emulator.gpsimd import abi
from emulator.gpsimd.errors import GpSimdError


@dataclass(frozen=True)
class TensorSpec:
    """A tensor's dtype name (see abi.DTYPES) and shape, without data."""

    dtype: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        n = abi.DTYPES[self.dtype].itemsize
        for s in self.shape:
            n *= s
        return n

    def to_json(self) -> dict:
        return {"dtype": self.dtype, "shape": list(self.shape)}


Value = Union[TensorSpec, float, int, bool]


def _tensor(arg: abi.NccArg, spec: TensorSpec, address: int | None) -> None:
    if spec.dtype not in abi.DTYPES:
        raise GpSimdError(f"dtype {spec.dtype} is not a GpSimd dtype ({', '.join(abi.DTYPES)})")
    if len(spec.shape) > abi.MAX_DIMS:
        raise GpSimdError(f"tensors have at most {abi.MAX_DIMS} dims, got {len(spec.shape)}")
    arg.kind = abi.KIND_TENSOR
    arg.dtype = abi.DTYPES[spec.dtype].code
    arg.ndim = len(spec.shape)
    for k, s in enumerate(spec.shape):
        arg.sizes[k] = s
    arg.data = address


def _scalar(arg: abi.NccArg, value: float | int) -> None:
    if isinstance(value, (bool, int)):
        arg.kind, arg.i = abi.KIND_SCALAR_INT, int(value)
    else:
        arg.kind, arg.f = abi.KIND_SCALAR_DOUBLE, float(value)


def _double(arg: abi.NccArg, value: float | int) -> None:
    arg.kind, arg.f = abi.KIND_DOUBLE, float(value)


def _int64(arg: abi.NccArg, value: float | int) -> None:
    if not isinstance(value, (bool, int)):
        raise GpSimdError(f"an int64_t argument needs an integer, got {value!r}")
    arg.kind, arg.i = abi.KIND_INT64, int(value)


_NON_TENSOR = {"scalar": _scalar, "double": _double, "int64": _int64}


def pack(
    op_name: str,
    kinds: Sequence[str],
    values: Sequence[Value],
    addresses: Sequence[int | None] | None = None,
) -> ctypes.Array:
    """Builds the ncc_arg array for `values`; `addresses` gives tensor data (None: data-less)."""
    if len(values) != len(kinds):
        raise GpSimdError(f"op '{op_name}' takes {len(kinds)} arguments, got {len(values)}")
    array = (abi.NccArg * max(len(kinds), 1))()
    for k, (kind, value) in enumerate(zip(kinds, values)):
        if kind == "tensor":
            if not isinstance(value, TensorSpec):
                raise GpSimdError(f"op '{op_name}': argument {k} must be a tensor")
            _tensor(array[k], value, addresses[k] if addresses else None)
        else:
            if isinstance(value, TensorSpec):
                raise GpSimdError(f"op '{op_name}': argument {k} must be a {kind}, not a tensor")
            _NON_TENSOR[kind](array[k], value)
    return array


def spec_of(arg: abi.NccArg) -> TensorSpec:
    """The dtype and shape a shape function returned."""
    dtype = abi.DTYPES_BY_CODE[arg.dtype].name
    return TensorSpec(dtype, tuple(int(arg.sizes[k]) for k in range(arg.ndim)))
