"""HLO shapes -> the emulator's value types (["f32", [dims]], ["tuple", [...]], ["token", []])."""
from __future__ import annotations

from typing import Any

from emulator.program.dtypes import DTYPES
from neuron_customcall.compiler.errors import CompileError


def value_type(shape: Any, inst: Any = None) -> list:
    if shape.is_tuple:
        return ["tuple", [value_type(s, inst) for s in shape.tuple_shapes]]
    if shape.is_token:
        return ["token", []]
    name = shape.element_type.lower()
    if name not in DTYPES:
        raise CompileError(f"element type {shape.element_type} is not supported", inst)
    return [name, list(shape.dimensions)]


def leaf_paths(shape: Any, prefix: tuple[int, ...] = ()) -> list[tuple[tuple[int, ...], Any]]:
    """(index path, array shape) of every leaf of a (nested) tuple shape, in order."""
    if not shape.is_tuple:
        return [(prefix, shape)]
    out = []
    for k, s in enumerate(shape.tuple_shapes):
        out.extend(leaf_paths(s, prefix + (k,)))
    return out
