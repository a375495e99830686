"""Sizes of values from their program types (["f32", [2, 3]] or ["tuple", [...]])."""
from __future__ import annotations

import math
from typing import Any

from emulator.program.dtypes import DTYPES, TUPLE


def leaves(t: Any) -> list[Any]:
    """The array types of a (possibly tuple) value type."""
    if t[0] == TUPLE:
        return [leaf for s in t[1] for leaf in leaves(s)]
    if t[0] == "token":
        return []
    return [t]


def elements(t: Any) -> int:
    """Elements of all array leaves of a value type."""
    return sum(math.prod(leaf[1]) for leaf in leaves(t))


def nbytes(t: Any) -> int:
    """Bytes of all array leaves of a value type."""
    return sum(math.prod(leaf[1]) * DTYPES[leaf[0]].itemsize for leaf in leaves(t))


def describe(t: Any) -> str:
    """A value type as text for traces: f32[8,16] or (f32[8], s32[])."""
    if t[0] == TUPLE:
        return "(" + ", ".join(describe(s) for s in t[1]) + ")"
    if t[0] == "token":
        return "token"
    return f"{t[0]}[{','.join(str(d) for d in t[1])}]"
