"""State shared by lowering functions: computation indices, constants, kernel payloads, and the
recognition of tiny computations (reducers, sort comparators) that have a fast NumPy path."""
from __future__ import annotations

from typing import Any

import numpy as np

from emulator.artifact import KernelPayload
from neuron_customcall.compiler.errors import CompileError

#: HLO opcodes whose to_apply computation a handler may run element-wise on whole arrays.
REDUCER_OPCODES = {"add": "add", "multiply": "multiply", "maximum": "maximum", "minimum": "minimum",
                   "and": "and", "or": "or", "xor": "xor"}


class LowerCtx:
    """Collects what the lowering of a module produces besides instructions."""

    def __init__(self, module: Any) -> None:
        self.module = module
        self.order: list[Any] = []          # computations in program order (index = position)
        self.index: dict[int, int] = {}     # id(HloComputation) -> program index
        self.lifted: set[int] = set()       # program indices used element-wise on arrays
        self.constants: list[np.ndarray] = []
        self.kernels: list[KernelPayload] = []
        # layout fusion (compiler/fusion.py): dot -> permutation of its result; absorbed transposes;
        # instructions whose emitted type differs from their HLO shape
        self.fused_transposes: dict[int, list[int]] = {}
        self.absorbed: set[int] = set()
        self.type_override: dict[int, Any] = {}

    def computation(self, comp: Any, lifted: bool = False) -> int:
        """The program index of `comp` (queued for lowering on first reference)."""
        k = self.index.get(id(comp))
        if k is None:
            k = len(self.order)
            self.index[id(comp)] = k
            self.order.append(comp)
        if lifted:
            self.lifted.add(k)
        return k

    def constant(self, value: np.ndarray) -> int:
        self.constants.append(np.array(value, order="C", copy=True))
        return len(self.constants) - 1

    def kernel(self, name: str, kind: str, data: bytes) -> int:
        self.kernels.append(KernelPayload(name, kind, data))
        return len(self.kernels) - 1


def called(inst: Any, k: int, what: str) -> Any:
    comps = inst.called_computations
    if len(comps) <= k:
        raise CompileError(f"missing {what} computation", inst)
    return comps[k]


def binary_reducer(comp: Any) -> str:
    """"add"/"maximum"/... if `comp` is f(p0, p1) = op(p0, p1) on scalars; "replace" if it returns
    p1; "" otherwise."""
    params = comp.parameters
    root = comp.root
    if len(params) != 2 or any(p.shape.is_tuple or p.shape.dimensions for p in params):
        return ""
    if root is params[1]:
        return "replace"
    if root.opcode in REDUCER_OPCODES and set(map(id, root.operands)) == {id(params[0]), id(params[1])} \
            and len(root.operands) == 2 and root.shape.element_type == params[0].shape.element_type:
        return REDUCER_OPCODES[root.opcode]
    return ""


def sort_fast_path(comp: Any) -> str:
    """"lt"/"gt" if the comparator is one LT/GT compare of the first operand's pair."""
    params = comp.parameters
    root = comp.root
    if len(params) < 2 or root.opcode != "compare" or len(root.operands) != 2:
        return ""
    a, b = root.operands
    direction = root.attributes.comparison_direction
    if a is params[0] and b is params[1] and direction in ("LT", "GT"):
        return direction.lower()
    if a is params[1] and b is params[0] and direction in ("LT", "GT"):
        return "gt" if direction == "LT" else "lt"
    return ""
