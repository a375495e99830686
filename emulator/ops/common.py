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


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype math is done in: f32 for the narrow floats (as XLA:CPU upcasts), else itself."""
    return F32 if dtype in NARROW else dtype


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
