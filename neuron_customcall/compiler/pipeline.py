"""compile_module: verify, schedule, lower, assign buffers, emit. Linear in the module size."""
from __future__ import annotations

import logging
from typing import Any

import hlo
from emulator.program.model import Computation, Instruction, Program
from emulator.program.ops import OPS, check_attr
from neuron_customcall import __version__
from neuron_customcall.compiler import buffers, emit, fusion, memory, verify
from neuron_customcall.compiler.async_pairs import run_async_pairs_synchronously
from neuron_customcall.compiler.errors import CompileError
from neuron_customcall.compiler.custom_op_rules import check_custom_op_limits
from neuron_customcall.compiler.dynamic_shapes import pad_dynamic_shapes
from neuron_customcall.compiler.flags import CompileFlags
from neuron_customcall.compiler.lowering import LowerCtx, lowering_for
from neuron_customcall.compiler.schedule import schedule
from neuron_customcall.compiler.source_lines import user_location
from neuron_customcall.compiler.reduce_of_broadcast import simplify_reduce_of_broadcast
from neuron_customcall.compiler.static_sizes import fold_static_dimension_sizes
from neuron_customcall.compiler.subbyte import widen_sub_byte_integers
from neuron_customcall.compiler.types import leaf_paths, value_type

log = logging.getLogger(__name__)

COMPILER_VERSION = f"{__version__}+emu2"  # emu2: emulator ops take their HLO names

#: Nested `call`s inlined at most this deep (each level is a Python frame of _emit_order; deeper
#: nests, which no framework emits, are a clear CompileError instead of a RecursionError).
MAX_CALL_DEPTH = 256


def _lower_computation(comp: Any, ctx: LowerCtx, flags: CompileFlags, is_entry: bool) -> Computation:
    order = schedule(comp)
    if flags.verify:
        verify.verify_computation(comp, order)
    fusion.fuse_dot_transposes(comp, order, ctx)
    params = [i for i in order if i.opcode == "parameter"]
    pending: list[tuple[Any, list[Any]]] = []   # (value key, operand keys)
    emitted: list[tuple[str, dict, list, str, str]] = []  # (op, attrs, type, name, source line)
    param_keys: list[Any] = []
    param_types: list[list] = []
    for p in params:
        if is_entry and p.shape.is_tuple:
            # the entry takes leaves; rebuild the tuple value (nested) from them
            leaves = []
            for path, s in leaf_paths(p.shape):
                key = (id(p), path)
                param_keys.append(key)
                param_types.append(value_type(s, p))
                leaves.append(key)
            _pack(p.shape, (), p, pending, emitted, _source(p, "", ctx, flags))
        else:
            param_keys.append(id(p))
            param_types.append(value_type(p.shape, p))
    alias: dict[Any, Any] = {}
    _emit_order(order, (), alias, pending, emitted, ctx, flags)
    result = _resolve(alias, id(comp.root))
    pending, emitted = _drop_dead(pending, emitted, result)
    a = buffers.assign(param_keys, pending, result)
    reuse = buffers.choose_reuse(pending, [e[0] for e in emitted], [e[2] for e in emitted], result,
                                 param_keys, [e[1] for e in emitted])
    insts = []
    for (key, ops), (op, attrs, t, name, source), free, r in zip(pending, emitted, a.frees, reuse):
        insts.append(Instruction(op=op, out=a.slots[key], ins=[a.slots[o] for o in ops], type=t, attrs=attrs,
                                 free=free, name=name if flags.instruction_names else "", reuse=r,
                                 source=source))
    return Computation(name=comp.name, num_slots=a.num_slots, params=[a.slots[k] for k in param_keys],
                       param_types=param_types, instructions=insts, result=a.slots[result],
                       result_type=value_type(comp.root.shape, comp.root))


def _key(prefix: tuple, inst: Any) -> Any:
    """The value key of `inst` inlined at call-site path `prefix` (top level: its id)."""
    return (prefix, id(inst)) if prefix else id(inst)


def _resolve(alias: dict[Any, Any], key: Any) -> Any:
    while key in alias:
        key = alias[key]
    return key


def _source(inst: Any, site: str, ctx: LowerCtx, flags: CompileFlags) -> str:
    """The user's line an instruction came from (profiles show it); an instruction of an inlined
    call without one of its own (JAX records frames on the call, not inside `jit(relu)`) has its
    call's. Kept only with the instruction names."""
    if not flags.instruction_names:
        return ""
    return user_location(inst, ctx.source_memo) or site


def _emit_order(order: list[Any], prefix: tuple, alias: dict[Any, Any], pending: list, emitted: list,
                ctx: LowerCtx, flags: CompileFlags, site: str = "") -> None:
    """Lower `order` into (pending, emitted); `call`s are inlined (their callee's instructions are
    emitted in place, parameters aliased to the call's operands, the call to the callee's root).

    Why inline: JAX wraps small helpers (relu, dynamic_update_index_in_dim, ...) in calls; inlined,
    they cost no sub-program call per use, and buffer analysis (in-place updates of a loop's state)
    sees through them."""
    for inst in order:
        key = _key(prefix, inst)
        if inst.opcode == "parameter":
            continue
        operands = [_resolve(alias, _key(prefix, o)) for o in inst.operands]
        if inst.opcode == "call" and len(inst.called_computations) == 1:
            if len(prefix) >= MAX_CALL_DEPTH:
                raise CompileError(f"calls nested more than {MAX_CALL_DEPTH} deep are not supported", inst)
            callee = inst.called_computations[0]
            sub = schedule(callee)
            if flags.verify:
                verify.verify_computation(callee, sub)
            fusion.fuse_dot_transposes(callee, sub, ctx)
            inner = prefix + (id(inst),)
            for p in callee.parameters:
                n = p.attributes.parameter_number
                if n >= len(operands):
                    raise CompileError(f"call passes {len(operands)} operands, {callee.name} has parameter {n}", inst)
                alias[_key(inner, p)] = operands[n]
            _emit_order(sub, inner, alias, pending, emitted, ctx, flags, _source(inst, site, ctx, flags))
            alias[key] = _resolve(alias, _key(inner, callee.root))
            continue
        if inst.opcode == "get-tuple-element" and len(operands) == 1 and operands[0] in ctx.tuple_parts:
            # an element of a tuple built here is that operand: no instruction (loop bodies and
            # inlined calls return tuples that are taken apart at once)
            parts = ctx.tuple_parts[operands[0]]
            if 0 <= inst.attributes.tuple_index < len(parts):
                alias[key] = parts[inst.attributes.tuple_index]
                continue
        lower = lowering_for(inst.opcode)
        if lower is None:
            raise CompileError(f"opcode {inst.opcode!r} is not supported by this compiler", inst)
        try:
            op, attrs = lower(inst, ctx)
        except CompileError:
            raise
        except Exception as e:  # noqa: BLE001 - a malformed attribute must name the instruction
            raise CompileError(f"can not lower: {type(e).__name__}: {e}", inst) from None
        _check_instruction_set(op, attrs, len(operands), inst)
        if op == "tuple":
            ctx.tuple_parts[key] = operands
        pending.append((key, operands))
        emitted.append((op, attrs, value_type(ctx.type_override.get(id(inst), inst.shape), inst), inst.name,
                        _source(inst, site, ctx, flags)))


def _drop_dead(pending: list, emitted: list, result: Any) -> tuple[list, list]:
    """(pending, emitted) without the pure instructions (emulator.program.ops) whose values do not
    reach `result` (what tuple forwarding leaves behind)."""
    live = {result}
    keep = [False] * len(pending)
    for i in range(len(pending) - 1, -1, -1):
        key, ops = pending[i]
        if key in live or not OPS[emitted[i][0]].pure:
            keep[i] = True
            live.update(ops)
    if all(keep):
        return pending, emitted
    return [p for p, k in zip(pending, keep) if k], [e for e, k in zip(emitted, keep) if k]


def _check_instruction_set(op: str, attrs: dict, n_operands: int, inst: Any) -> None:
    """The emitted instruction against the one definition of the instruction set (emulator.program),
    so a lowering bug is a compile error here, not a rejected artifact later."""
    spec = OPS.get(op)
    if spec is None or set(attrs) != set(spec.attrs) or (spec.arity is not None and spec.arity != n_operands) \
            or not all(check_attr(kind, attrs[k]) for k, kind in spec.attrs.items()):
        raise CompileError(f"internal error: lowering produced {op} {attrs} with {n_operands} operands, "
                           f"which the instruction set does not allow", inst)


def _pack(shape: Any, path: tuple[int, ...], p: Any, pending: list, emitted: list, source: str) -> Any:
    """Emit tuple instructions rebuilding a tuple parameter from its leaves; return the key."""
    if not shape.is_tuple:
        return (id(p), path)
    keys = [_pack(s, path + (k,), p, pending, emitted, source) for k, s in enumerate(shape.tuple_shapes)]
    key = id(p) if not path else (id(p), path, "tuple")
    pending.append((key, keys))
    emitted.append(("tuple", {}, value_type(shape, p), p.name + "".join(f".{k}" for k in path), source))
    return key


def _check_lifted(program: Program, lifted: set[int], ctx: LowerCtx) -> None:
    todo = sorted(lifted)
    seen = set(todo)
    while todo:
        k = todo.pop()
        comp = program.computations[k]
        hcomp = ctx.order[k]
        for inst in comp.instructions:
            if not OPS[inst.op].liftable:
                try:
                    hinst = hcomp.instruction(inst.name) if inst.name else hcomp.root
                except KeyError:  # an instruction inlined from a callee
                    hinst = hcomp.root
                raise CompileError(f"computation {hcomp.name} is applied element-wise (reducer, comparator, "
                                   f"scatter update or map) but uses {inst.op}, which needs whole arrays", hinst)
            if inst.op == "call" and inst.attrs["computation"] not in seen:
                seen.add(inst.attrs["computation"])
                todo.append(inst.attrs["computation"])


def compile_module(module: Any, flags: CompileFlags | None = None, *, fingerprint: str | None = None,
                   cache_key: str | None = None) -> bytes:
    """Compile an HLO module (hlo.HloModule) into artifact bytes (deterministic).

    `fingerprint`: hlo.fingerprint(module), if the caller has it already (a compile cache does);
    it is recorded in the manifest and otherwise computed here (a good part of compile time).
    `cache_key`: the compile cache's key for this module and flags, recorded in the manifest so
    that a cache entry can prove which graph it is (docs/trust.md)."""
    flags = flags or CompileFlags()
    if module.entry is None:
        raise CompileError(f"module {module.name} has no entry computation")
    if fingerprint is None:
        fingerprint = hlo.fingerprint(module)  # of the module as given, before any rewrite
    module = simplify_reduce_of_broadcast(widen_sub_byte_integers(pad_dynamic_shapes(
        fold_static_dimension_sizes(run_async_pairs_synchronously(module)))))
    ctx = LowerCtx(module)
    ctx.computation(module.entry)
    comps: list[Computation] = []
    k = 0
    while k < len(ctx.order):
        comps.append(_lower_computation(ctx.order[k], ctx, flags, is_entry=(k == 0)))
        k += 1
    for k, comp in enumerate(comps):  # in-place state updates only where the while handler owns the state
        if ctx.roles.get(k) != {"body"}:
            for inst in comp.instructions:
                if inst.op == "dynamic-update-slice":
                    inst.reuse = -1
    program = Program(computations=comps, entry=0)
    _check_lifted(program, ctx.lifted, ctx)
    check_custom_op_limits(ctx)
    memory_estimate = memory.check_budget(program, sum(c.nbytes for c in ctx.constants))
    inputs, outputs = emit.io_entries(module.entry)
    manifest = {
        "format": "neuron-customcall-neff",
        "module_name": module.name,
        "inputs": inputs,
        "outputs": outputs,
        "hlo_fingerprint": fingerprint,
        "compiler_version": COMPILER_VERSION,
        "flags": flags.to_json(),
        "aliases": buffers.output_aliases(module),
        "kernels": [k.name for k in ctx.kernels],
        "memory_estimate": memory_estimate,
    }
    if cache_key is not None:
        manifest["cache_key"] = cache_key
    data = emit.emit(program, manifest, ctx)
    log.debug("compiled %s: %d computations, %d constants, %d bytes", module.name, len(comps),
              len(ctx.constants), len(data))
    return data
