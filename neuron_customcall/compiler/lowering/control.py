"""Control flow: while, conditional, call, scan -> sub-program references."""
from __future__ import annotations

from typing import Any

from hlo.opcodes import ASYNC, COLLECTIVE, IO, OPCODES, RNG
from neuron_customcall.compiler.errors import CompileError
from neuron_customcall.compiler.lowering.context import LowerCtx, called
from neuron_customcall.compiler.lowering.registry import fail, leaf_types, lowers, shape_rule, shapes
from neuron_customcall.compiler.types import leaf_paths


#: opcode classes whose instructions act beyond their result (a loop holding one must run)
_EFFECT_CLASSES = frozenset({COLLECTIVE, ASYNC, IO, RNG})


def _has_effects(comp: Any, seen: set[int] | None = None) -> bool:
    """Whether `comp` (or a computation it calls) holds an instruction with an effect besides its
    value: a custom-call (a kernel may print), I/O, a collective, a random-number draw."""
    seen = set() if seen is None else seen
    if id(comp) in seen:
        return False
    seen.add(id(comp))
    for inst in comp.instructions:
        record = OPCODES.get(inst.opcode)
        if inst.opcode == "custom-call" or record is None or record.cls in _EFFECT_CLASSES:
            return True
        if any(_has_effects(c, seen) for c in inst.called_computations):
            return True
    return False


def _source(inst: Any, path: tuple[int, ...]) -> tuple[Any, tuple[int, ...]]:
    """Where leaf `path` of `inst`'s value comes from: through tuple and get-tuple-element
    instructions, to (instruction, path within its value)."""
    for _ in range(1 << 16):  # bounded: each step moves one level through the graph
        if path and inst.opcode == "tuple" and path[0] < len(inst.operands):
            inst, path = inst.operands[path[0]], path[1:]
        elif inst.opcode == "get-tuple-element" and len(inst.operands) == 1:
            inst, path = inst.operands[0], (int(inst.attributes.tuple_index),) + path
        else:
            break
    return inst, path


def _same_constant(a: Any, b: Any) -> bool:
    """Two constants holding the same bits (not just equal values: -0.0, NaN payloads)."""
    if a.opcode != "constant" or b.opcode != "constant" or a.shape != b.shape:
        return False
    try:
        return a.constant_value().tobytes() == b.constant_value().tobytes()
    except Exception:  # noqa: BLE001 - an elided or malformed literal proves nothing
        return False


def _keeps_state(body: Any, loop: Any) -> bool:
    """Whether every leaf of the body's result is the same leaf of its parameter, or a constant
    equal to the loop's initial value of that leaf: then the state never changes."""
    params = body.parameters
    if len(params) != 1 or len(loop.operands) != 1:
        return False
    param, init = params[0], loop.operands[0]
    paths = [path for path, _ in leaf_paths(param.shape)]
    for path in paths:
        got, rest = _source(body.root, path)
        if got is param and rest == path:
            continue
        start, start_rest = _source(init, path)
        if rest or start_rest or not _same_constant(got, start):
            return False
    return True


@lowers("while")
def _while(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    # XLA orders a while's computations (body, condition).
    body, cond = called(inst, 0, "body"), called(inst, 1, "condition")
    if cond.root.shape.element_type != "PRED":
        body, cond = cond, body
    if not (_has_effects(body) or _has_effects(cond)) and (not inst.shape.leaves() or _keeps_state(body, inst)):
        # a loop without effects whose body leaves its state as it found it computes nothing: its
        # value is its operand whether or not it ends (XLA:CPU returns at once, its simplifier
        # forwards the invariant state and drops the loop, even when the condition is `true`)
        return "opt-barrier", {}
    return "while", {"cond": ctx.computation(cond, role="cond"), "body": ctx.computation(body, role="body")}


@lowers("conditional")
def _conditional(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    branches = inst.called_computations
    by_index = inst.operands[0].shape.element_type != "PRED"
    if not by_index and len(branches) != 2:
        raise CompileError("a predicated conditional needs two branches", inst)
    if len(inst.operands) != len(branches) + 1:
        raise CompileError(f"{len(branches)} branches but {len(inst.operands) - 1} branch operands", inst)
    return "conditional", {"branches": [ctx.computation(b) for b in branches], "by_index": by_index}


@lowers("call")
def _call(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return "call", {"computation": ctx.computation(called(inst, 0, "callee"))}


@lowers("scan")
def _scan(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return "scan", {"dim": int(inst.attributes.dimensions[0]), "num_carries": int(inst.attributes.num_carries),
                    "reverse": bool(inst.attributes.is_reverse),
                    "computation": ctx.computation(called(inst, 0, "scanned computation"))}


@lowers("fusion")
def _fusion(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    """A fusion (in HLO dumped after XLA's optimizations) computes its fused computation: a call."""
    return "call", {"computation": ctx.computation(called(inst, 0, "fused computation"))}


# -- shape rules (XLA's; run by the verifier before lowering) ------------------------------
@shape_rule("while")
def _while_shapes(inst: Any) -> None:
    ops, out = shapes(inst)
    body_out = inst.called_computations[0].root.shape if inst.called_computations else None
    if body_out is not None and body_out.element_type != "PRED" and \
            (leaf_types(body_out) != leaf_types(ops[0]) or leaf_types(out) != leaf_types(ops[0])):
        fail(inst, f"while body result {body_out} does not match its init {ops[0]}")


@shape_rule("conditional")
def _conditional_shapes(inst: Any) -> None:
    out = inst.shape
    for b in inst.called_computations:
        if leaf_types(b.root.shape) != leaf_types(out):
            fail(inst, f"branch {b.name} returns {b.root.shape}, the conditional {out}")


@shape_rule("scan")
def _scan_shapes(inst: Any) -> None:
    """XLA's: inputs share the scanned dimension's length; the computation maps (elements...,
    carries...) to (outputs..., carries...) with the carries' types unchanged; the result is the
    outputs stacked along the dimension, then the carries."""
    ops, out = shapes(inst)
    dims = list(inst.attributes.dimensions)
    nc = int(inst.attributes.num_carries)
    if len(dims) != 1 or not 0 <= nc <= len(ops) or not inst.called_computations:
        fail(inst, "scan needs one dimension, num_carries <= its operand count and a computation")
    dim, n_in = dims[0], len(ops) - nc
    inputs, inits = ops[:n_in], ops[n_in:]
    if any(s.is_tuple or not 0 <= dim < s.rank for s in inputs):
        fail(inst, f"scan dimension {dim} is not a dimension of every input")
    length = {s.dimensions[dim] for s in inputs}
    if len(length) > 1:
        fail(inst, f"scan inputs have different lengths {sorted(length)} along dimension {dim}")
    root = inst.called_computations[0].root.shape
    got = leaf_types(root) if root.is_tuple else [(root.element_type, tuple(root.dimensions))]
    want_leaves = [(s.element_type, tuple(s.dimensions)) for s in (out.tuple_shapes if out.is_tuple else [out])]
    carries = [(s.element_type, tuple(s.dimensions)) for s in inits]
    if len(got) != len(want_leaves) or got[len(got) - nc:] != carries or want_leaves[len(want_leaves) - nc:] != carries:
        fail(inst, f"scan computation returns {root}, which does not fit carries {[str(s) for s in inits]} "
                   f"and the result {out}")
    for (et, d), (wet, wd) in zip(got[:len(got) - nc], want_leaves[:len(want_leaves) - nc]):
        n = next(iter(length)) if length else (wd[dim] if dim < len(wd) else -1)
        if et != wet or wd != d[:dim] + (n,) + d[dim:]:
            fail(inst, f"scan output {wet}{list(wd)} is not the computation's {et}{list(d)} stacked along "
                       f"dimension {dim}")
