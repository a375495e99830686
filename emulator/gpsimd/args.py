"""Op arguments as the runtime's ``ncc_arg``: one description (a small dict, the worker
protocol's argument format) built on the host, and one way to fill an ``ncc_arg`` from it in the
worker, for shape calls and compute calls alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence, Union

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


def tensor_fields(spec: TensorSpec, offset: int = 0) -> dict:
    """The description of a tensor argument (its data at `offset` in a shared file)."""
    if spec.dtype not in abi.DTYPES:
        raise GpSimdError(f"dtype {spec.dtype} is not a GpSimd dtype ({', '.join(abi.DTYPES)})")
    if len(spec.shape) > abi.MAX_DIMS:
        raise GpSimdError(f"tensors have at most {abi.MAX_DIMS} dims, got {len(spec.shape)}")
    # int(): a framework's symbolic size (a torch SymInt while tracing with dynamic shapes) becomes
    # its concrete value, specialising the trace as a C shape function needs.
    return {"kind": abi.KIND_TENSOR, "dtype": abi.DTYPES[spec.dtype].code,
            "shape": [int(s) for s in spec.shape], "offset": offset}


def _scalar(value: object) -> dict:
    if isinstance(value, (bool, int)):
        return {"kind": abi.KIND_SCALAR_INT, "i": int(value)}
    return {"kind": abi.KIND_SCALAR_DOUBLE, "f": float(value)}


def _int64(value: object) -> dict:
    if not isinstance(value, (bool, int)):
        raise GpSimdError(f"an int64_t argument needs an integer, got {value!r}")
    return {"kind": abi.KIND_INT64, "i": int(value)}


# argument kind -> description of a non-tensor value
_SCALAR_FIELDS: dict[str, Callable[[object], dict]] = {
    "scalar": _scalar,
    "double": lambda value: {"kind": abi.KIND_DOUBLE, "f": float(value)},
    "int64": _int64,
}


def scalar_fields(kind: str, value: object) -> dict:
    """The description of a Scalar, double or int64_t argument."""
    if isinstance(value, TensorSpec) or hasattr(value, "spec"):
        raise GpSimdError(f"a {kind} argument can not be a tensor")
    return _SCALAR_FIELDS[kind](value)


def fill(arg: abi.NccArg, fields: dict, data: int | None) -> None:
    """Fills an ncc_arg from its description; `data` is the tensor's address (None: data-less)."""
    arg.kind = fields["kind"]
    if fields["kind"] == abi.KIND_TENSOR:
        arg.dtype = fields["dtype"]
        arg.ndim = len(fields["shape"])
        for k, s in enumerate(fields["shape"]):
            arg.sizes[k] = s
        arg.data = data
    else:
        arg.f = fields.get("f", 0.0)
        arg.i = fields.get("i", 0)


def check(fields: object, file_size: int | None = None) -> int:
    """Checks an argument description a worker received (a host's request, or a forged one)
    before anything points at memory: known kind and dtype code, at most MAX_DIMS sizes of
    0..2**62, and for tensors with data a range ``[offset, offset + nbytes)`` inside the file of
    `file_size` bytes. Returns the tensor's byte size (0 for a non-tensor). ValueError says what
    is wrong."""
    if not isinstance(fields, dict):
        raise ValueError("an argument description must be an object")
    kind = fields.get("kind")
    if kind not in (abi.KIND_TENSOR, abi.KIND_SCALAR_DOUBLE, abi.KIND_SCALAR_INT, abi.KIND_DOUBLE, abi.KIND_INT64):
        raise ValueError(f"unknown argument kind {kind!r}")
    if kind != abi.KIND_TENSOR:
        f, i = fields.get("f", 0.0), fields.get("i", 0)
        if not isinstance(f, (int, float)) or isinstance(f, bool) or not is_int(i) or not -2**63 <= i < 2**63:
            raise ValueError("a scalar argument needs a number f and a 64-bit integer i")
        return 0
    dtype, shape = fields.get("dtype"), fields.get("shape")
    if not is_int(dtype) or dtype not in abi.DTYPES_BY_CODE:
        raise ValueError(f"unknown dtype code {dtype!r}")
    if not isinstance(shape, list) or len(shape) > abi.MAX_DIMS or not all(is_int(n) and 0 <= n < 2**62 for n in shape):
        raise ValueError(f"a tensor shape must be at most {abi.MAX_DIMS} sizes in 0..2**62, got {shape!r}")
    nbytes = abi.DTYPES_BY_CODE[dtype].itemsize
    for n in shape:
        nbytes *= n
    if file_size is not None:
        offset = fields.get("offset")
        if not is_int(offset) or offset < 0 or offset + nbytes > file_size:
            raise ValueError(f"a tensor of {nbytes} bytes at offset {offset!r} does not lie in its shared file "
                             f"of {file_size} bytes")
    return nbytes


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def describe(op_name: str, kinds: Sequence[str], values: Sequence[Value]) -> list[dict]:
    """The argument descriptions of a shape call: data-less tensors and scalar values."""
    if len(values) != len(kinds):
        raise GpSimdError(f"op '{op_name}' takes {len(kinds)} arguments, got {len(values)}")
    fields = []
    for k, (kind, value) in enumerate(zip(kinds, values)):
        if kind == "tensor":
            if not isinstance(value, TensorSpec):
                raise GpSimdError(f"op '{op_name}': argument {k} must be a tensor")
            fields.append(tensor_fields(value))
        else:
            fields.append(scalar_fields(kind, value))
    return fields


def spec_of(fields: dict) -> TensorSpec:
    """The dtype and shape a shape function returned (``{"dtype": code, "shape": [...]}``)."""
    return TensorSpec(abi.DTYPES_BY_CODE[fields["dtype"]].name, tuple(fields["shape"]))
