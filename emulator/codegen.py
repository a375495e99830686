"""Computations as generated Python functions: the plain runner of a computation, and a whole
`while` loop (condition and body inlined, its state kept in local variables, loop-invariant
instructions hoisted out) as one function.

Why generate code: a while body over small tensors runs its instructions thousands of times, and
a generic interpreter loop (a step tuple unpacked, a bound lambda, a list store, a loop over frees
per instruction) costs about as much as the NumPy work itself. Each instruction becomes one line
`r<out> = f<k>(r<in>...)`; registers are local variables and freed slots are set to None.

Only slot numbers and generated names enter the source (nothing from the artifact's text); a
failure is mapped back to its instruction by the line number in its traceback.

Three things happen while the lines are written:
* folding: a `foldable` step whose operands are all constant (constants, iotas, broadcasts and
  converts of them...) is evaluated once, at build time; its readers get the array by name.
* loop state: in a fused while loop, `get-tuple-element` of the loop's tuple parameter is the
  local variable holding that element (no call), and the body's root `tuple` becomes a single
  assignment of the next state.
* hoisting (loop-invariant code motion, as XLA's WhileLoopInvariantCodeMotion): a body
  instruction whose op is `hoistable` (emulator.program.ops: deterministic, no effect) and whose
  operands are all loop-invariant (constants, state elements the body passes through unchanged,
  other hoisted values) runs once before the loop instead of once per iteration. An instruction
  that would overwrite an invariant in place (`reuse`: the compiler proved the value dead after
  it within one iteration, which no longer holds for a value computed once) gets a copy of it
  instead, so every iteration sees the same invariant.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from emulator.errors import EmulatorError
from emulator.native.regions import Region, RegionPlanner
from emulator.program.model import Computation
from emulator.program.ops import OPS

#: (fn, input slots, output slot, freed slots) of one instruction, as LoadedProgram binds it.
Step = tuple[Callable[..., Any], tuple[int, ...], int, tuple[int, ...]]

#: iterations of a fused loop between two reads of the clock (the while timeout)
LOOP_CHUNK = 256


def foldable_steps(comp: Computation) -> frozenset[int]:
    """The steps to evaluate at build time (when their operands turn out constant): foldable ops
    (emulator.program.ops), except those whose value a later instruction may overwrite in place
    (`reuse`)."""
    return frozenset(k for k in _not_overwritten(comp) if OPS[comp.instructions[k].op].foldable)


def _not_overwritten(comp: Computation) -> set[int]:
    producer: dict[int, int] = {}
    overwritten: set[int] = set()
    for k, inst in enumerate(comp.instructions):
        if inst.reuse >= 0 and inst.ins[inst.reuse] in producer:
            overwritten.add(producer[inst.ins[inst.reuse]])
        producer[inst.out] = k
    return set(range(len(comp.instructions))) - overwritten


@dataclass
class _Source:
    """Lines being generated, the names they bind and where each line's instruction is."""

    env: dict[str, Any]
    lines: list[str] = field(default_factory=list)
    where: dict[int, str] = field(default_factory=dict)  # line number (1-based) -> instruction

    def add(self, text: str, indent: int, instruction: str | None = None) -> None:
        self.lines.append(" " * indent + text)
        if instruction is not None:
            self.where[len(self.lines)] = instruction

    def build(self, name: str, label: str) -> Callable[..., Any]:
        where = self.where

        def failed(e: Exception) -> EmulatorError:
            """The error naming the instruction whose line raised `e` (first frame: the function)."""
            tb = e.__traceback__
            k = where.get(tb.tb_lineno) if tb is not None else None
            what = f"computation {k}" if k is not None else label
            return EmulatorError(f"{what} failed: {type(e).__name__}: {e}")

        self.env.update(EmulatorError=EmulatorError, failed=failed)
        code = compile("\n".join(self.lines), f"<emulator {label}>", "exec")
        exec(code, self.env)  # noqa: S102 - generated from slot numbers only (module docstring)
        return self.env[name]


@dataclass
class _Hoist:
    """Loop-invariant names of a fused loop, and the lines computing them before the loop."""

    invariant: set[str]
    lines: list[tuple[str, str]] = field(default_factory=list)  # (text, instruction)


def _emit(src: _Source, comp: Computation, steps: Sequence[Step], names: Sequence[str], value: dict[int, str],
          prefix: str, indent: int, *, state: str | None = None, hoist: _Hoist | None = None,
          record: list[tuple[Any, list[str], str]] | None = None, fusion: _Fusion | None = None) -> None:
    """Append the lines of `comp` to `src`; `value` maps each live slot to the name holding it
    (parameters on entry) and is left mapping the result. Names starting with `prefix + "r"` are
    registers (freed after their last use); others (constants, state, hoisted values) persist.
    `state`: the name of a loop's tuple parameter, whose elements are the variables s0, s1, ...
    `record` receives (instruction, argument names, result name) of every line run in the loop
    (not folded, not hoisted), in order: the loop runner's ownership analysis reads it.
    `fusion` gathers element-wise instructions into fused regions (emulator.native.regions)."""
    foldable = foldable_steps(comp)
    reg = prefix + "r"
    for k, ((fn, ins, out, free), inst) in enumerate(zip(steps, comp.instructions)):
        label = f"{comp.name}: instruction {names[k]}"
        args = [value[i] for i in ins]
        if fusion is not None and not (k in foldable and all(a.startswith("c") for a in args)):
            if fusion.take(k, inst, fn, args, label, value, reg):
                continue
            args = [value[i] for i in ins]  # the region it closed wrote its outputs' registers
        if state is not None and inst.op == "get-tuple-element" and args == [state]:
            value[out] = f"s{inst.attrs['index']}"
        elif k in foldable and all(a.startswith("c") for a in args):
            folded = fn(*[src.env[a] for a in args])
            if isinstance(folded, np.ndarray) and folded.ndim == 0 and type(folded[()]).__module__ == "numpy":
                folded = folded[()]  # a NumPy scalar: scalar operators take it ~10x faster than a 0-d array
            elif isinstance(folded, np.ndarray) and folded.flags.writeable:
                folded = folded.view()
                folded.flags.writeable = False  # shared by every run: an output of it gets copied
            src.env[f"c{prefix}{k}"] = folded
            value[out] = f"c{prefix}{k}"
        else:
            if hoist is not None and inst.reuse >= 0 and args[inst.reuse] in hoist.invariant:
                args[inst.reuse] = f"_copy({args[inst.reuse]})"  # never overwrite an invariant
            src.env[f"{prefix}f{k}"] = fn
            call = f"{prefix}f{k}({', '.join(args)})"
            if (hoist is not None and OPS[inst.op].hoistable
                    and all(a.startswith("c") or a in hoist.invariant for a in ins_names(args))):
                name = f"{prefix}h{k}"
                hoist.lines.append((f"{name} = {call}", label))
                hoist.invariant.add(name)
                value[out] = name
            else:
                src.add(f"{reg}{out} = {call}", indent, label)
                value[out] = f"{reg}{out}"
                if record is not None:
                    record.append((inst, args, value[out]))
        dropped = [f for f in free if value.pop(f, "").startswith(reg)]
        if dropped:
            src.add("; ".join(f"{reg}{f} = None" for f in dropped), indent)


class _Fusion:
    """Fused regions of one computation while its lines are written (emulator.native.regions
    decides membership; this class keeps the generated names and lines consistent). A region is
    closed, and its call written, before a non-member that reads one of its values or rewrites,
    frees or overwrites in place a register it reads; members' frees of its inputs wait until
    after the call."""

    def __init__(self, src: _Source, planner: RegionPlanner, in_types: Sequence[Sequence[Any]], prefix: str,
                 indent: int) -> None:
        self.src, self.planner, self.in_types = src, planner, in_types
        self.prefix, self.indent = prefix, indent
        self.called: list[Region] = []
        self.call_names: list[str] = []

    def take(self, k: int, inst: Any, fn: Callable[..., Any], args: list[str], label: str, value: dict[int, str],
             reg: str) -> bool:
        """Adds instruction k to a region (True), or closes the open region if instruction k,
        emitted as usual next, needs that (False)."""
        planner = self.planner
        made = planner.node_for(inst.op, inst.attrs, self.in_types[k], inst.type, args, fn, label)
        if made is None and planner.open is not None and any(planner.is_placeholder(a) for a in args):
            # reads the open region's value in another shape (a broadcast of a row it computed):
            # the region ends here, and the instruction may start the next one
            self.close(value, reg)
            args = [value[i] for i in inst.ins]
            made = planner.node_for(inst.op, inst.attrs, self.in_types[k], inst.type, args, fn, label)
        if made is not None:
            if planner.open is not None and not planner.fits(inst.type):
                self.close(value, reg)
            node, leaves = made
            value[inst.out] = planner.add(node, leaves, tuple(inst.type[1]))
            for f in inst.free:
                name = value.pop(f, "")
                if name.startswith(reg) and not planner.is_placeholder(name):
                    planner.deferred_frees.append(name)
            return True
        if planner.open is not None:
            touched = [f"{reg}{inst.out}", *(value.get(f, "") for f in inst.free)]
            if inst.reuse >= 0:
                touched.append(args[inst.reuse])
            if any(planner.is_placeholder(a) for a in args) or planner.reads_captured(touched):
                self.close(value, reg)
        return False

    def close(self, value: dict[int, str], reg: str) -> None:
        """Writes the open region's call (or, for a region without arithmetic, its instructions
        as plain lines) and the frees its members deferred."""
        planner = self.planner
        live = {slot: name for slot, name in value.items() if planner.is_placeholder(name)}
        region = planner.close(live)
        if region is None:
            return
        j = len(planner.regions) - 1
        p, src, indent = self.prefix, self.src, self.indent
        label = f"fused region {j} of " + ", ".join(n.label for n in region.nodes)
        outs = [f"{reg}{slot}" for slot in live]
        slots = dict(zip(region.outputs, live))  # node -> the slot its value leaves in
        if region.computes:
            # An output that only re-indexes an input (a transpose of a weight gradient that is
            # also returned) stays the handler's view of it: no copy is made for it.
            views = [k for k in region.outputs if region.nodes[k].is_view]
            region.outputs = [k for k in region.outputs if not region.nodes[k].is_view]
            called = [f"{reg}{slots[k]}" for k in region.outputs]
            targets, values = [], []
            if called:
                fallback, call = f"{p}fb{j}", f"{p}n{j}"
                src.env[fallback] = region.fallback()
                src.env[call] = region.fallback()  # until `native` binds the compiled function
                self.called.append(region)
                self.call_names.append(call)
                leaves = "".join(f", {leaf.name}" for leaf in region.leaves)
                targets.append(called[0] if len(called) == 1 else f"({', '.join(called)})")  # one: the array
                values.append(f"{call}({fallback}{leaves})")
            for k in views:
                node = region.nodes[k]
                src.env[f"{p}p{j}_{k}"] = node.fn
                targets.append(f"{reg}{slots[k]}")
                values.append(f"{p}p{j}_{k}({region.leaves[node.refs[0][1]].name})")
            # one statement: every input is read before any output register is written (an output
            # may take the register of an input that a member freed)
            if targets:
                src.add(f"{', '.join(targets)} = {', '.join(values)}", indent, label)
        else:  # plain lines: temporaries for values nobody outside reads
            name_of = {k: f"{reg}{slot}" for k, slot in slots.items()}
            temps = []
            for k, node in enumerate(region.nodes):
                target = name_of.get(k)
                if target is None:
                    target = f"{p}t{j}_{k}"
                    temps.append(target)
                    name_of[k] = target
                src.env[f"{p}p{j}_{k}"] = node.fn
                args = [region.leaves[i].name if kind == "leaf" else name_of[i] for kind, i in node.refs]
                src.add(f"{target} = {p}p{j}_{k}({', '.join(args)})", indent, node.label)
            if temps:
                src.add("; ".join(f"{t} = None" for t in temps), indent)
        for slot, name in zip(live, outs):
            value[slot] = name
        freed = [n for n in dict.fromkeys(planner.deferred_frees) if n not in outs]
        planner.deferred_frees = []
        if freed:
            src.add("; ".join(f"{n} = None" for n in freed), indent)


def ins_names(args: Sequence[str]) -> list[str]:
    """The names an argument list reads (`_copy(x)` reads x)."""
    return [a[len("_copy("):-1] if a.startswith("_copy(") else a for a in args]


def make_runner(comp: Computation, steps: Sequence[Step], names: Sequence[str], *,
                in_types: Sequence[Sequence[Any]] | None = None,
                native: Callable[[list[Region]], list[Callable[..., Any]]] | None = None) -> Callable[..., Any]:
    """The computation as one generated Python function of its parameters.

    With `native` (and each instruction's operand types, `in_types`), element-wise regions
    become one call each of the function `native` returns for them (emulator.native): the fused
    runner. `native` may raise; the caller then keeps the plain runner."""
    src = _Source({})
    value = {p: f"rr{p}" for p in comp.params}
    src.add(f"def run({', '.join(value.values())}):", 0)
    src.add("try:", 2)
    fusion = None
    if native is not None:
        if in_types is None:
            raise ValueError("a fused runner needs the instructions' operand types")
        fusion = _Fusion(src, RegionPlanner(src.env), in_types, "r", 4)
    _emit(src, comp, steps, names, value, "r", 4, fusion=fusion)
    if fusion is not None:
        fusion.close(value, "rr")
        functions = native(fusion.called) if native is not None and fusion.called else []
        for name, fn in zip(fusion.call_names, functions):
            src.env[name] = fn
    src.add(f"return {value[comp.result]}", 4)
    src.add("except EmulatorError:", 2)
    src.add("raise", 4)
    src.add("except Exception as e:", 2)
    src.add("raise failed(e) from e", 4)
    return src.build("run", f"computation {comp.name}")


def _param_readers(comp: Computation, param: int) -> tuple[list[bool], bool]:
    """For each instruction, whether it reads the parameter (slot `param` before anything else is
    written there: slots are reused), and whether the computation returns the parameter itself."""
    live, reads = True, []
    for inst in comp.instructions:
        reads.append(live and param in inst.ins)
        if inst.out == param:
            live = False
    return reads, live and comp.result == param


def _state_uses(comp: Computation, param: int) -> bool:
    """Whether `comp` reads its tuple parameter other than by get-tuple-element (then the
    generated code builds the tuple for it)."""
    reads, returned = _param_readers(comp, param)
    return returned or any(r and not (inst.op == "get-tuple-element" and tuple(inst.ins) == (param,))
                           for r, inst in zip(reads, comp.instructions))


def make_loop_runner(cond: Computation, cond_steps: Sequence[Step], cond_names: Sequence[str],
                     body: Computation, body_steps: Sequence[Step], body_names: Sequence[str], *,
                     size: int, overdue: Callable[[float, int], None],
                     own: Callable[[Any, bool], Any] | None) -> Callable[[Any], Any]:
    """A while loop over a tuple state of `size` elements as one function of the initial state.

    `overdue(start, chunks)` raises when the loop ran too long (checked every LOOP_CHUNK
    iterations); `own(state, always)`, given for loops that update their state in place, makes
    every array leaf of the state the loop's own (on entry with always=True, after each
    iteration with False)."""
    if len(cond.params) != 1 or len(body.params) != 1:
        raise EmulatorError("a while loop's condition and body take one parameter each")
    src = _Source({"_copy": np.array, "_overdue": overdue, "_own": own, "_monotonic": time.monotonic,
                   "_CHUNK": range(LOOP_CHUNK)})
    state = [f"s{k}" for k in range(size)]
    packed = f"({', '.join(state)}{',' if size == 1 else ''})"

    # The body first: its lines decide which elements are invariant (passed through unchanged).
    body_src = _Source(src.env)
    (bp,) = body.params
    last = body.instructions[-1] if body.instructions else None
    root_tuple = last is not None and last.op == "tuple" and last.out == body.result and len(last.ins) == size
    passed = _passed_through(body, bp, size) if root_tuple else set()
    hoist = _Hoist({f"s{k}" for k in passed})
    value = {bp: "bstate"}
    whole_state = _state_uses(body, bp)
    if whole_state:
        body_src.add(f"bstate = {packed}", 6)
    steps, names = list(body_steps), list(body_names)
    if root_tuple:  # the root tuple becomes the state assignment below
        steps, names = steps[:-1], names[:-1]
        body_comp = replace(body, instructions=body.instructions[:-1])
    else:
        body_comp = body
    record: list[tuple[Any, list[str], str]] = []
    _emit(body_src, body_comp, steps, names, value, "b", 6, state="bstate", hoist=hoist, record=record)
    nxt = [value[i] for i in last.ins] if root_tuple else None
    owned = None if own is None or nxt is None or whole_state else _updated_in_place(record, nxt)
    if owned is not None:  # proven: copy the updated elements on entry, check nothing per iteration
        own = None
    elif own is not None and nxt is not None:  # state updated in place must not be a hoisted value
        nxt = [f"_copy({n})" if n in hoist.invariant and not n.startswith("s") else n for n in nxt]

    (cp,) = cond.params
    src.add("def loop(state):", 0)
    src.add("try:", 2)
    unpack = f"{', '.join(state)}{',' if size == 1 else ''}" if size else "()"  # `() = state`: no elements
    src.add(f"{unpack} = _own(state, True)" if own else f"{unpack} = state", 4)
    for k in sorted(owned or ()):
        src.add(f"s{k} = _copy(s{k})", 4)  # the caller's array is never written
    for text, label in hoist.lines:
        src.add(text, 4, label)
    src.add("start = _monotonic(); chunks = 0", 4)
    src.add("while True:", 4)
    src.add("for _ in _CHUNK:", 6)
    cvalue = {cp: "qstate"}
    if _state_uses(cond, cp):
        src.add(f"qstate = {packed}", 8)
    _emit(src, cond, cond_steps, cond_names, cvalue, "q", 8, state="qstate")
    src.add(f"if not {cvalue[cond.result]}:", 8)
    src.add(f"return {packed}", 10)
    offset = len(src.lines)
    for n, text in enumerate(body_src.lines, 1):
        src.lines.append("  " + text)
        if n in body_src.where:
            src.where[offset + n] = body_src.where[n]
    nxt_text = (f"{', '.join(nxt)}{',' if size == 1 else ''}" or "()") if nxt is not None else value[body.result]
    src.add(f"{unpack} = _own(({nxt_text}), False)" if own else f"{unpack} = {nxt_text}", 8)
    src.add("chunks += 1", 6)
    src.add("_overdue(start, chunks)", 6)
    src.add("except EmulatorError:", 2)
    src.add("raise", 4)
    src.add("except Exception as e:", 2)
    src.add("raise failed(e) from e", 4)
    return src.build("loop", f"while loop over {body.name}")


def _updated_in_place(record: Sequence[tuple[Any, list[str], str]], nxt: Sequence[str]) -> set[int] | None:
    """The state elements a loop body updates in place, when the generated code can prove that
    each stays the loop's own from one iteration to the next without a check; None when it can
    not (the loop then re-owns its whole state after every iteration: control._own_state).

    Proven for element k when: the body's only reference to it (`s<k>`) is one in-place
    dynamic-update-slice, whose result is read by nothing but the next state, at position k and
    there alone. Then that result is the same array (written in place) or the handler's fresh
    copy: unshared and writeable either way, so only the entry needs a copy of it. Every other
    element is never written in place by the loop and may stay shared. Any in-place update of
    another value, or of an element some other way, gives None."""
    reads: dict[str, int] = {}
    for _, args, _ in record:
        for a in ins_names(args):
            reads[a] = reads.get(a, 0) + 1
    for n in nxt:
        reads[n] = reads.get(n, 0) + 1
    owned: set[int] = set()
    for pos, (inst, args, out) in enumerate(record):
        if inst.reuse < 0 or inst.op != "dynamic-update-slice":
            continue
        target = args[inst.reuse]
        if inst.reuse != 0 or not target.startswith("s") or not target[1:].isdigit():
            return None
        k = int(target[1:])
        later = record[pos + 1:]
        if (k >= len(nxt) or nxt[k] != out or reads.get(target) != 1 or reads.get(out) != 1
                or any(o == out for _, _, o in later)):
            return None
        owned.add(k)
    return owned


def _passed_through(body: Computation, param: int, size: int) -> set[int]:
    """State elements the body returns unchanged: root tuple operand k is get-tuple-element k of
    the parameter, and nothing writes into that element in place."""
    element: dict[int, int] = {}  # slot -> the state element it holds (as read, unchanged)
    written: set[int] = set()
    reads, _ = _param_readers(body, param)
    for inst, from_param in zip(body.instructions[:-1], reads):
        if inst.reuse >= 0 and inst.ins[inst.reuse] in element:
            written.add(element[inst.ins[inst.reuse]])
        element.pop(inst.out, None)
        if from_param and inst.op == "get-tuple-element" and tuple(inst.ins) == (param,):
            element[inst.out] = inst.attrs["index"]
    root = body.instructions[-1]
    return {k for k, slot in enumerate(root.ins) if element.get(slot) == k and k not in written and k < size}
