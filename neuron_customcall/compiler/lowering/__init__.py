"""HLO opcode -> lowering, one module per op family, each registering its lowerings and shape
rules with the registry (registry.py) beside their definitions; importing this package imports
them all."""
from __future__ import annotations

from neuron_customcall.compiler.lowering import collective, control, elementwise, indexing, linalg, misc, reduce, shape  # noqa: F401
from neuron_customcall.compiler.lowering import send_recv  # noqa: F401
from neuron_customcall.compiler.lowering.context import LowerCtx
from neuron_customcall.compiler.lowering.registry import LOWERINGS, SHAPE_RULES, Lowering, lowering_for

__all__ = ["LOWERINGS", "LowerCtx", "Lowering", "SHAPE_RULES", "lowering_for"]
