"""Element-wise HLO opcodes: all but compare are lowered generically (registry.py) to the emulator
op of the same name."""
from __future__ import annotations

from typing import Any

from neuron_customcall.compiler.errors import CompileError
from neuron_customcall.compiler.lowering.context import LowerCtx
from neuron_customcall.compiler.lowering.registry import lowers

_DIRECTIONS = {"EQ", "NE", "LT", "LE", "GT", "GE"}
_COMPARISON_TYPES = {"", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"}


@lowers("compare")
def _compare(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    direction = inst.attributes.comparison_direction
    ctype = inst.attributes.comparison_type
    if direction not in _DIRECTIONS:
        raise CompileError(f"unsupported comparison direction {direction!r}", inst)
    if ctype not in _COMPARISON_TYPES:
        raise CompileError(f"unsupported comparison type {ctype!r}", inst)
    return "compare", {"direction": direction, "total_order": ctype == "TOTALORDER"}
