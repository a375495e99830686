"""Buffer assignment: every value gets a slot; a slot is reused once its value is dead, and each
instruction lists the slots whose last use it is, so the executor frees them immediately.

Parameters take the first slots (in parameter order), constants and temporaries the slots handed
out in schedule order, the result's slot is live to the end. An instruction's result never reuses
a slot freed by that same instruction (the executor writes the result, then frees). Output/input
aliasing (HLO input_output_alias) is resolved to leaf indices for the manifest.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

from emulator.program.ops import OPS
from neuron_customcall.compiler.errors import CompileError
from neuron_customcall.compiler.types import leaf_paths


@dataclass
class Assignment:
    slots: dict[Any, int]          # value key -> slot
    frees: list[list[int]]         # per instruction: slots freed after it
    num_slots: int


def assign(params: list[Any], insts: list[tuple[Any, list[Any]]], result: Any) -> Assignment:
    """params: value keys; insts: (value key, operand keys) in schedule order; result: a key."""
    last_use: dict[Any, int] = {}
    for i, (_, ops) in enumerate(insts):
        for o in ops:
            last_use[o] = i
    slots: dict[Any, int] = {}
    for k, p in enumerate(params):
        slots[p] = k
    next_slot = len(params)
    pool: list[int] = []
    frees: list[list[int]] = []
    for i, (key, ops) in enumerate(insts):
        if pool:
            slot = heapq.heappop(pool)
        else:
            slot = next_slot
            next_slot += 1
        slots[key] = slot
        freed = []
        for o in dict.fromkeys(ops):
            if last_use.get(o) == i and o != result:
                freed.append(slots[o])
        if key not in last_use and key != result:
            freed.append(slot)  # dead value: drop it at once
        for s in freed:
            heapq.heappush(pool, s)
        frees.append(sorted(freed))
    return Assignment(slots, frees, max(next_slot, 1))


def output_aliases(module: Any) -> list[dict[str, Any]]:
    """The module's input_output_alias as leaf indices: [{"output", "input", "kind"}]."""
    entry = module.entry
    proto = module.attributes.input_output_alias
    if not proto.entries:
        return []
    out_leaves = {path: k for k, (path, _) in enumerate(leaf_paths(entry.root.shape))}
    in_leaves: dict[tuple[int, tuple[int, ...]], int] = {}
    k = 0
    for p in entry.parameters:
        for path, _ in leaf_paths(p.shape):
            in_leaves[(p.attributes.parameter_number, path)] = k
            k += 1
    out_shapes = dict(leaf_paths(entry.root.shape))
    in_shapes = {(p.attributes.parameter_number, path): s for p in entry.parameters for path, s in leaf_paths(p.shape)}
    aliases = []
    for e in proto.entries:
        okey, ikey = tuple(e.output_shape_index), (e.parameter_number, tuple(e.parameter_shape_index))
        if okey not in out_leaves or ikey not in in_leaves:
            raise CompileError(f"input_output_alias entry {okey} <- param {ikey} names no leaf", entry.root)
        if out_shapes[okey].nbytes != in_shapes[ikey].nbytes:
            # XLA's rule (HloInputOutputAliasConfig::Verify): the buffers' byte sizes agree; the
            # shapes may differ (an output bitcast from the parameter it updates in place)
            raise CompileError(f"input_output_alias: output {okey} ({out_shapes[okey]}) and parameter {ikey} "
                               f"({in_shapes[ikey]}) differ in size", entry.root)
        kind = {0: "may-alias", 1: "may-alias", 2: "must-alias"}.get(int(e.kind), "may-alias")
        aliases.append({"output": out_leaves[okey], "input": in_leaves[ikey], "kind": kind})
    return sorted(aliases, key=lambda a: (a["output"], a["input"]))


def choose_reuse(insts: list[tuple[Any, list[Any]]], ops: list[str], types: list[list], result: Any,
                 params: list[Any] = (), attrs: list[dict] = ()) -> list[int]:
    """Per instruction, the operand position whose buffer its result may overwrite, or -1.

    Allowed when the operand is a non-scalar temporary of the same type as the result, produced by
    an op that allocates fresh arrays (`fresh` in emulator.program.ops), used exactly once (by this instruction), and not
    the computation's result. Then no other slot can hold it or a view of it, and reusing it saves
    an allocation and a pass of page faults per element-wise op (large in training steps).
    """
    producer: dict[Any, int] = {key: i for i, (key, _) in enumerate(insts)}
    uses: dict[Any, int] = {}
    for _, operands in insts:
        for o in operands:
            uses[o] = uses.get(o, 0) + 1
    # a copy (e.g. a transpose fused into its dot) of a fresh, once-used value is fresh too
    fresh = []
    for i, (_, operands) in enumerate(insts):
        src = producer.get(operands[0]) if ops[i] == "copy" and operands else None
        fresh.append(OPS[ops[i]].fresh or (src is not None and fresh[src] and uses[operands[0]] == 1))
    in_place_state = _state_elements_used_once(insts, ops, params, attrs)
    reuse = []
    for i, (_, operands) in enumerate(insts):
        choice = -1
        if ops[i] == "dynamic-update-slice" and operands and operands[0] in in_place_state and uses[operands[0]] == 1:
            choice = 0
        elif OPS[ops[i]].in_place and types[i][1]:
            for k in OPS[ops[i]].in_place:  # select's predicate is not: it is read while the result is written
                o = operands[k]
                p = producer.get(o)
                if p is not None and fresh[p] and uses[o] == 1 and o != result and types[p] == types[i]:
                    choice = k
                    break
        reuse.append(choice)
    return reuse


def _state_elements_used_once(insts: list[tuple[Any, list[Any]]], ops: list[str], params: list[Any],
                              attrs: list[dict]) -> set[Any]:
    """Keys of `get-tuple-element(state, k)` values of a one-parameter computation whose state is
    read only by get-tuple-elements with distinct indices: the only reference to that element.

    In a while body (the pipeline keeps the result only for computations used solely as bodies)
    a dynamic-update-slice may then update such an element in place; the emulator's while handler
    owns the loop state (copies it on entry, re-owns shared or read-only elements per iteration),
    so a scan's output buffer is written in place instead of copied every iteration."""
    if len(params) != 1 or not attrs:
        return set()
    state = params[0]
    seen: dict[int, Any] = {}
    for i, (key, operands) in enumerate(insts):
        if state not in operands:
            continue
        if ops[i] != "get-tuple-element" or len(operands) != 1 or attrs[i]["index"] in seen:
            return set()
        seen[attrs[i]["index"]] = key
    return set(seen.values())
