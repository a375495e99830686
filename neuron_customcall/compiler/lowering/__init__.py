"""HLO opcode -> lowering function, one module per op family.

A lowering function takes (instruction, LowerCtx) and returns (emulator op, attributes); every
HLO instruction becomes exactly one emulator instruction (parameters become slots), which keeps
buffer assignment and error reporting one to one with the HLO.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from neuron_customcall.compiler.lowering import control, elementwise, indexing, linalg, misc, reduce, shape
from neuron_customcall.compiler.lowering.context import LowerCtx

Lowering = Callable[[Any, LowerCtx], tuple[str, dict]]

TABLE: dict[str, Lowering] = {}
for _module in (elementwise, shape, reduce, linalg, indexing, control, misc):
    for _opcode, _fn in _module.LOWERINGS.items():
        assert _opcode not in TABLE, f"opcode {_opcode} lowered twice"
        TABLE[_opcode] = _fn

__all__ = ["TABLE", "LowerCtx", "Lowering"]
