"""State shared by lowering functions: computation indices, constants, kernel payloads, and the
recognition of tiny computations (reducers, sort comparators) that have a fast NumPy path."""
from __future__ import annotations

import hashlib
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
        self.roles: dict[int, set[str]] = {}  # program index -> how it is used ("body", "cond", ...)
        self.constants: list[np.ndarray] = []
        self._constant_index: dict[tuple, int] = {}
        self.kernels: list[KernelPayload] = []
        self._kernel_index: dict[tuple[str, bytes], int] = {}  # (kind, sha256) -> payload index
        # layout fusion (compiler/fusion.py): dot -> permutation of its result; absorbed transposes;
        # instructions whose emitted type differs from their HLO shape
        self.fused_transposes: dict[int, list[int]] = {}
        self.absorbed: set[int] = set()
        self.type_override: dict[int, Any] = {}
        self.tuple_parts: dict[Any, list[Any]] = {}  # value key of an emitted tuple -> its operand keys
        # (source file, line, stack frame id) -> the user's "file:line" (compiler/source_lines.py)
        self.source_memo: dict[tuple, str] = {}

    def computation(self, comp: Any, lifted: bool = False, role: str = "") -> int:
        """The program index of `comp` (queued for lowering on first reference)."""
        k = self.index.get(id(comp))
        if k is None:
            k = len(self.order)
            self.index[id(comp)] = k
            self.order.append(comp)
        if lifted:
            self.lifted.add(k)
        self.roles.setdefault(k, set()).add(role or ("lifted" if lifted else "other"))
        return k

    def constant(self, value: np.ndarray) -> int:
        """The index of `value` in the constants section (equal constants are stored once)."""
        value = np.array(value, order="C", copy=True)
        key = (value.dtype.str, value.shape, value.tobytes())
        k = self._constant_index.get(key)
        if k is None:
            k = self._constant_index[key] = len(self.constants)
            self.constants.append(value)
        return k

    def kernel(self, name: str, kind: str, data: bytes) -> int:
        """The payload index of a kernel; a kernel called several times is stored once."""
        key = (kind, hashlib.sha256(data).digest())
        if key not in self._kernel_index:
            self._kernel_index[key] = len(self.kernels)
            self.kernels.append(KernelPayload(name, kind, data))
        return self._kernel_index[key]


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


def _is_compare(inst: Any, a: Any, b: Any, directions: tuple[str, ...]) -> str:
    """The direction of `inst` if it is compare(a, b) with one of `directions` (IEEE, not total
    order: NaN compares false), else ""."""
    if inst.opcode != "compare" or len(inst.operands) != 2 or inst.operands[0] is not a or inst.operands[1] is not b:
        return ""
    if inst.attributes.comparison_type == "TOTALORDER":
        return ""
    d = inst.attributes.comparison_direction
    return d if d in directions else ""


def _both(inst: Any, opcode: str) -> tuple[Any, Any] | None:
    """The two operands of a binary `opcode` instruction, else None."""
    if inst.opcode != opcode or len(inst.operands) != 2:
        return None
    return inst.operands[0], inst.operands[1]


def _xla_argminmax(sv: Any, si: Any, xv: Any, xi: Any, yv: Any, yi: Any) -> str:
    """"argmax_ge"/"argmin_le" for XLA's client-library ArgMinMax comparator (torch_xla's argmax):

        c = compare(xv, yv, GE|LE)
        ROOT tuple(select(c, xv, yv), select(compare(xv, yv, EQ), minimum(xi, yi), select(c, xi, yi)))

    Without NaNs: the extreme value, ties to the smallest index. A NaN loses to whatever comes
    after it (GE/LE with a NaN is false), so XLA:CPU's in-order loop ends with the argmax/argmin
    of the elements after the last NaN, or the last NaN itself."""
    c = sv.operands[0]
    direction = _is_compare(c, xv, yv, ("GE", "LE"))
    if not direction or si.operands[0].opcode != "compare" or not _is_compare(si.operands[0], xv, yv, ("EQ",)):
        return ""
    lo, inner = si.operands[1], si.operands[2]
    if lo.opcode != "minimum" or len(lo.operands) != 2 or set(map(id, lo.operands)) != {id(xi), id(yi)}:
        return ""
    if inner.opcode != "select" or list(inner.operands[1:]) != [xi, yi] \
            or _is_compare(inner.operands[0], xv, yv, (direction,)) != direction:
        return ""
    return "argmax_ge" if direction == "GE" else "argmin_le"


def argminmax_reducer(comp: Any) -> str:
    """"argmax"/"argmin" if `comp` is JAX's comparator of jnp.argmax/argmin (lax's argmax):

        pick_val = or(compare(xv, yv, GT|LT), compare(xv, xv, NE))        # bigger, or x is NaN
        pick_idx = or(pick_val, and(compare(xv, yv, EQ), compare(xi, yi, LT)))
        ROOT tuple(select(pick_val, xv, yv), select(pick_idx, xi, yi))

    with parameters (xv, xi, yv, yi). Its reduction is: the first NaN if any, else the extreme
    value, ties to the smallest index (an associative, commutative choice), which is NumPy's
    argmax/argmin of the values when the indices are positions. Operands of `or`/`and` may come in
    either order. XLA's own ArgMinMax comparator (torch_xla) is "argmax_ge"/"argmin_le"."""
    params = comp.parameters
    root = comp.root
    if len(params) != 4 or any(p.shape.is_tuple or p.shape.dimensions for p in params) or root.opcode != "tuple":
        return ""
    xv, xi, yv, yi = params
    if xi.shape.element_type not in ("S8", "S16", "S32", "S64", "U8", "U16", "U32", "U64") \
            or xv.shape.element_type in ("PRED", "C64", "C128") or len(root.operands) != 2:
        return ""
    sv, si = root.operands
    if sv.opcode != "select" or si.opcode != "select" or list(sv.operands[1:]) != [xv, yv]:
        return ""
    xla = _xla_argminmax(sv, si, xv, xi, yv, yi)
    if xla or list(si.operands[1:]) != [xi, yi]:
        return xla

    def pick_val(inst: Any) -> str:
        ops = _both(inst, "or")
        if ops is None:
            return ""
        for a, b in (ops, ops[::-1]):
            d = _is_compare(a, xv, yv, ("GT", "LT"))
            if d and _is_compare(b, xv, xv, ("NE",)):
                return d
        return ""

    direction = pick_val(sv.operands[0])
    ops = _both(si.operands[0], "or")
    if not direction or ops is None:
        return ""
    for a, b in (ops, ops[::-1]):
        tie = _both(b, "and")
        if pick_val(a) == direction and tie is not None and any(
                _is_compare(e, xv, yv, ("EQ",)) and _is_compare(i, xi, yi, ("LT",)) for e, i in (tie, tie[::-1])):
            return "argmax" if direction == "GT" else "argmin"
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


_IGNORED_FIELDS = ("name", "id", "operand_ids", "control_predecessor_ids", "called_computation_ids", "metadata",
                   "frontend_attributes", "statistics_viz", "original_value")


def _signature(inst: Any) -> bytes:
    """An instruction's attributes without identity fields: equal for the same operation."""
    a = type(inst.attributes)()
    a.CopyFrom(inst.attributes)
    for f in _IGNORED_FIELDS:
        a.ClearField(f)
    return inst.opcode.encode() + b"|" + a.SerializeToString(deterministic=True)


def _mirrored(x: Any, y: Any, params: list[Any], memo: dict[tuple[int, int], bool]) -> bool:
    """Whether y is x with every parameter 2k replaced by parameter 2k+1 (same ops, same attrs)."""
    key = (id(x), id(y))
    if key in memo:
        return memo[key]
    if x.opcode == "parameter":
        k = next((i for i, p in enumerate(params) if p is x), -1)
        ok = k % 2 == 0 and k + 1 < len(params) and y is params[k + 1]
    else:
        ok = (_signature(x) == _signature(y) and len(x.operands) == len(y.operands) and not x.called_computations
              and all(_mirrored(a, b, params, memo) for a, b in zip(x.operands, y.operands)))
    memo[key] = ok
    return ok


class KeyComputation:
    """A view of a comparator whose root is the key expression f(lhs params) of `f(a) < f(b)`.

    It quacks like an HloComputation for the compiler's pipeline (name, root, parameters,
    instructions); the instructions stay owned by the comparator (nothing is modified)."""

    def __init__(self, comp: Any, root: Any) -> None:
        self.name = comp.name + ".key"
        self.root = root
        self.parameters = comp.parameters
        self.instructions = comp.instructions
        self.module = comp.module
        self._comp = comp

    def instruction(self, name: str) -> Any:
        return self._comp.instruction(name)


def sort_key_view(comp: Any) -> tuple[KeyComputation, str] | None:
    """(key computation, "lt"/"gt") if the comparator is `compare(f(lhs...), f(rhs...))` with LT or
    GT: then sorting is a stable argsort of f(operands). JAX canonicalises floats that way."""
    root = comp.root
    params = comp.parameters
    if root.opcode != "compare" or len(root.operands) != 2 or root.attributes.comparison_direction not in ("LT", "GT"):
        return None
    x, y = root.operands
    if x.shape.is_tuple or x.shape.dimensions:
        return None
    if not _mirrored(x, y, params, {}):
        return None
    return KeyComputation(comp, x), root.attributes.comparison_direction.lower()
