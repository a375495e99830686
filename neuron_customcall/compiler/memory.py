"""The compile-time memory budget: refuse a program whose values can not fit in memory.

Why: `f32[100000,100000] iota()` compiles in milliseconds and then fails at run time with a raw
MemoryError (or the kernel's OOM killer) after allocating 37 GiB. The compiler knows every
value's type and when the buffer assignment frees it, so it can estimate the largest amount of
memory live at once and refuse the module with a clear CompileError instead.

The estimate is a lower bound of what a run needs: per computation, the parameters plus every
allocating instruction's result, minus the values freed after their last use; views (reshape,
broadcast, transpose, slice, tuples) and in-place results (`reuse`) allocate nothing; constants
are counted once. The program's peak is the largest computation's peak plus the constants.
The limit is NEURON_CUSTOMCALL_MEMORY_LIMIT (bytes, K/M/G suffix, 0 for none), by default the
machine's physical memory.
"""
from __future__ import annotations

import bisect
import math
import os
from typing import Any

from emulator.program.dtypes import DTYPES
from emulator.program.model import Computation, Program
from neuron_customcall.compiler.errors import CompileError
from neuron_customcall.sizes import format_size, parse_size

MEMORY_LIMIT_ENV = "NEURON_CUSTOMCALL_MEMORY_LIMIT"

#: Emulator ops whose result is a view of an operand or a container of existing values.
_NO_ALLOCATION = {"tuple", "get-tuple-element", "reshape", "bitcast", "broadcast", "transpose", "slice",
                  "constant", "opt-barrier", "after-all", "add-dependency"}


def memory_limit() -> int:
    """The budget in bytes (0: none)."""
    raw = os.environ.get(MEMORY_LIMIT_ENV, "").strip()
    if raw:
        size = parse_size(raw)
        if size is None:
            raise CompileError(f"{MEMORY_LIMIT_ENV}={raw!r} is not a size (bytes, optionally with K, M, G or T; "
                               "0 for no limit)")
        return size
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX: no default budget
        return 0


def value_bytes(t: list) -> int:
    """Bytes of a value of emulator type `t` (tuples: the sum of their leaves)."""
    if t[0] == "tuple":
        return sum(value_bytes(s) for s in t[1])
    if t[0] == "token":
        return 0
    return math.prod(t[1]) * DTYPES[t[0]].itemsize


def _broadcast_outputs(comp: Computation) -> list[Any]:
    """Broadcasts whose value is a leaf of the computation's result. A broadcast is a view of a
    smaller array inside the program, but a program output is handed to the caller as an array of
    its own, so it is allocated in full when the program returns (f32[] -> f32[1e5,1e5,100])."""
    # slots are reused once free, so a value is the last write to its slot before its reader:
    # walk back from the end, each tuple's operands resolved among the instructions before it
    writes: dict[int, list[int]] = {}
    for k, inst in enumerate(comp.instructions):
        writes.setdefault(inst.out, []).append(k)
    found: list[Any] = []
    todo = [(len(comp.instructions), comp.result)]
    while todo:
        before, slot = todo.pop()
        positions = writes.get(slot, [])
        i = bisect.bisect_left(positions, before)
        if i == 0:
            continue
        k = positions[i - 1]
        inst = comp.instructions[k]
        if inst.op == "tuple":
            todo.extend((k, s) for s in inst.ins)
        elif inst.op == "broadcast":
            found.append(inst)
    return found


def computation_peak(comp: Computation, returns: bool = False) -> tuple[int, Any]:
    """(estimated peak live bytes, the instruction at which it is reached or None). `returns`: the
    entry computation, whose broadcast outputs are materialised when it returns."""
    live = {slot: value_bytes(t) for slot, t in zip(comp.params, comp.param_types)}
    total = sum(live.values())
    peak, where = total, None
    for inst in comp.instructions:
        size = 0 if inst.op in _NO_ALLOCATION or inst.reuse >= 0 else value_bytes(inst.type)
        total += size - live.get(inst.out, 0)
        live[inst.out] = size
        if total > peak:
            peak, where = total, inst
        for slot in inst.free:
            total -= live.pop(slot, 0)
    if returns:
        for inst in _broadcast_outputs(comp):
            total += value_bytes(inst.type)
            if total > peak:
                peak, where = total, inst
    return peak, where


def check_budget(program: Program, constants_bytes: int) -> int:
    """CompileError if the program's estimated peak memory exceeds the limit; else the estimate
    (bytes), which the artifact records so that a cached artifact is held to the limit too."""
    peaks = [(computation_peak(c, returns=k == program.entry), c) for k, c in enumerate(program.computations)]
    (peak, inst), comp = max(peaks, key=lambda p: p[0][0])
    need = peak + constants_bytes
    at = f" (at {inst.name or inst.op} in {comp.name}: {inst.type[0]}{inst.type[1]})" if inst is not None else ""
    check_estimate(need, at)
    return need


def check_estimate(need: int, at: str = "") -> None:
    """CompileError if `need` bytes exceed the limit. Also called on a compile-cache hit with the
    estimate the artifact recorded: the limit may be lower than when the entry was compiled."""
    limit = memory_limit()
    if limit and need > limit:
        raise CompileError(f"the program needs at least {format_size(need)} of memory at once{at}, more than the "
                           f"limit of {format_size(limit)} ({MEMORY_LIMIT_ENV})")
