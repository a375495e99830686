"""Helpers shared by handler modules: compute dtypes, reducers by name, lifting of sub-programs."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from emulator.program.dtypes import DTYPES, NARROW_FLOATS

F32 = np.dtype(np.float32)
NARROW = frozenset(DTYPES[n] for n in NARROW_FLOATS)

#: Reducer names the compiler recognises in a to_apply computation -> the NumPy ufunc.
REDUCERS: dict[str, np.ufunc] = {
    "add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
}


def reducer_ufunc(name: str, dtype: np.dtype) -> np.ufunc:
    """The ufunc for a recognised reducer; bool and/or map to logical ops."""
    if dtype == np.bool_:
        return {"and": np.logical_and, "or": np.logical_or, "add": np.logical_or, "multiply": np.logical_and,
                "maximum": np.logical_or, "minimum": np.logical_and, "xor": np.logical_xor}[name]
    return REDUCERS[name]


def reducer_identity(name: str, dtype: np.dtype) -> Any:
    """The value `name`'s reducer leaves unchanged in `dtype` (r(x, identity) = x): what stands
    for a position that takes no part in a reduction (reduce-window's padding and holes)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return name in ("and", "multiply", "minimum")
    if name in ("add", "or", "xor"):
        return dtype.type(0)
    if name == "multiply":
        return dtype.type(1)
    if name == "and":
        return np.asarray(-1).astype(dtype) if dtype.kind in "iu" else dtype.type(1)
    big = name == "minimum"
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return dtype.type(info.max if big else info.min)
    if dtype.kind == "c":
        raise ValueError(f"{name} of complex values has no identity")
    return dtype.type(np.inf if big else -np.inf)


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype math is done in: f32 for the narrow floats (as XLA:CPU upcasts), else itself."""
    return F32 if dtype in NARROW else dtype


def dot_compute_dtype(lhs: np.dtype, rhs: np.dtype, result: np.dtype) -> np.dtype:
    """The dtype a dot or convolution multiplies and accumulates in, as XLA does: an integer
    result accumulates in the result type (s8 x s8 -> s32 never wraps at 8 bits; a narrower result
    wraps exactly as modular arithmetic in it would), a float result of integer operands in the
    result's compute type, float operands in the widest of the operands' and the result's compute
    types (f32 x f32 -> f64 accumulates in f64). A bool result computes in s32 (any nonzero sum is
    true)."""
    if result == np.bool_:
        return np.dtype(np.int32)
    if result.kind in "iu":
        return result
    cdt = np.result_type(compute_dtype(lhs), compute_dtype(rhs))
    if cdt.kind in "iub":
        return compute_dtype(result)
    return np.result_type(cdt, compute_dtype(result))


def unpack(result: Any, n: int) -> list[Any]:
    """A sub-program's result as a list of n values (a tuple root for n > 1)."""
    if n == 1 and not isinstance(result, tuple):
        return [result]
    return list(result)


def lifted(fn: Callable[..., Any], n_out: int) -> Callable[..., list[Any]]:
    """A scalar computation applied element-wise to whole arrays (the compiler checks it can be)."""
    def call(*args: Any) -> list[Any]:
        return unpack(fn(*args), n_out)
    return call
