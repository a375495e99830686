"""Printer of xla.HloModuleProto as HLO text, in XLA's style.

The output is what XLA's `HloModule::ToString()` writes with operand shapes printed inline:

    HloModule m, entry_computation_layout={(f32[2]{0})->f32[2]{0}}

    %add (a: f32[], b: f32[]) -> f32[] {
      %a = f32[] parameter(0)
      ...
    }

    ENTRY %main (p: f32[2]) -> f32[2] {
      ...
      ROOT %r = f32[2]{0} add(f32[2]{0} %p, f32[2]{0} %p)
    }

Non-entry computations come first (in proto order), the entry last.  A scheduled module (one with
a `schedule`) prints `is_scheduled=true` and each computation's instructions in schedule order.
Attributes come from the same table the parser reads (attributes.py).  Async ops wrapping one
instruction are written in XLA's shorthand (`negate-start(...)`, wrapped computation left out)
when reading that back gives the same module, else spelled out (`async-start(...), calls=...`).

On the live corpus the output is XLA's own printing character for character, except that
`api_version=API_VERSION_UNSPECIFIED` (which XLA prints but its parser refuses) is left out and
header attributes of XLA's HloModuleConfig (replica_count...) have no proto field to come from.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Set, Tuple

from hlo.errors import HloError, HloParseError
from hlo.opcodes import can_wrap
from hlo.schema import hlo_pb2, xla_data_pb2
from hlo.text import attributes as A
from hlo.text import values as V
from hlo.text.literals import print_literal
from hlo.text.shapes import print_shape

__all__ = ["print_hlo_text"]

_ALIAS_NAMES = {hlo_pb2.MAY_ALIAS: "may-alias", hlo_pb2.MUST_ALIAS: "must-alias"}


def print_hlo_text(module: hlo_pb2.HloModuleProto, print_operand_shapes: bool = True) -> str:
    """The module as HLO text that our parser and XLA's parser both read back.

    `print_operand_shapes`: write each operand's shape before its name, as XLA's default printer
    does (`add(f32[] %a, f32[] %b)`); off gives the compact `add(%a, %b)`.
    Raises HloError when the proto holds something text cannot say (an element type outside the
    schema, a literal whose data does not fit its shape).
    """
    try:
        plan = _async_shorthand_plan(module)
        if plan.wrapped:
            # XLA writes async ops wrapping one instruction as `negate-start(...)` and leaves the
            # wrapped computation out; its parser rebuilds that computation with made-up names.
            # We write the shorthand only when reading it back gives this very module.
            text = _print_module(module, print_operand_shapes, plan)
            if _reads_back_as(text, module):
                return text
        return _print_module(module, print_operand_shapes, _AsyncPlan())
    except (HloError, ValueError, TypeError, KeyError, IndexError) as exc:
        raise HloError(f"module {module.name!r} cannot be printed as HLO text: {exc}") from exc


class _AsyncPlan:
    """Async instructions to write in XLA's shorthand, with the instruction each one wraps."""

    def __init__(self) -> None:
        self.wrapped: Dict[Tuple[int, int], hlo_pb2.HloInstructionProto] = {}  # (comp id, inst id) ->
        self.hidden: Set[int] = set()  # computations the shorthand stands for


def _async_shorthand_plan(module: hlo_pb2.HloModuleProto) -> _AsyncPlan:
    plan = _AsyncPlan()
    comps = {c.id: c for c in module.computations}
    calls: Dict[int, int] = {}
    for comp in module.computations:
        for inst in comp.instructions:
            for cid in inst.called_computation_ids:
                calls[cid] = calls.get(cid, 0) + 1
    for comp in module.computations:
        by_id = {i.id: i for i in comp.instructions}
        for inst in comp.instructions:
            if inst.opcode != "async-start" or len(inst.called_computation_ids) != 1:
                continue
            callee = comps.get(inst.called_computation_ids[0])
            if callee is None or calls.get(callee.id) != 1 or callee.id == module.entry_computation_id:
                continue
            *params, root = list(callee.instructions) or [None]
            if (root is None or root.id != callee.root_id or not can_wrap(root.opcode)
                    or [p.opcode for p in params] != ["parameter"] * len(params)
                    or [p.parameter_number for p in params] != list(range(len(params)))
                    or list(root.operand_ids) != [p.id for p in params]
                    or len(params) != len(inst.operand_ids)):
                continue
            plan.wrapped[(comp.id, inst.id)] = root
            plan.hidden.add(callee.id)
        for inst in comp.instructions:  # updates and dones follow their start through operand 0
            if inst.opcode in ("async-update", "async-done") and inst.operand_ids:
                source = by_id.get(inst.operand_ids[0])
                while source is not None and source.opcode == "async-update" and (comp.id, source.id) not in plan.wrapped:
                    source = by_id.get(source.operand_ids[0]) if source.operand_ids else None
                if source is not None and (comp.id, source.id) in plan.wrapped:
                    plan.wrapped[(comp.id, inst.id)] = plan.wrapped[(comp.id, source.id)]
    return plan


def _reads_back_as(text: str, module: hlo_pb2.HloModuleProto) -> bool:
    from hlo.canonical import canonical_module  # canonical imports the attribute table too
    from hlo.text.parser import parse_hlo_text

    try:
        again = parse_hlo_text(text)
    except HloParseError:
        return False
    return canonical_module(again).SerializeToString(deterministic=True) == canonical_module(
        module).SerializeToString(deterministic=True)


_NAME = re.compile(r"(?:[\w.$]|-(?!>))+")


def _check_names(module: hlo_pb2.HloModuleProto) -> None:
    """Every name must read back as one name token (XLA's names always do)."""
    names = [module.name] + [c.name for c in module.computations]
    names += [i.name for c in module.computations for i in c.instructions]
    for name in names:
        if not _NAME.fullmatch(name):
            raise ValueError(f"name {name!r} cannot be written in HLO text")


def _print_module(module: hlo_pb2.HloModuleProto, print_operand_shapes: bool, plan: _AsyncPlan) -> str:
    _check_names(module)
    comp_names = {c.id: c.name for c in module.computations}
    lines: List[str] = [_header(module), ""]
    stack = _stack_frames(module)
    if stack:
        lines.extend(stack)
    entry = None
    for comp in module.computations:
        if comp.id == module.entry_computation_id and comp.name == module.entry_computation_name:
            entry = comp
            continue
        if comp.id in plan.hidden:
            continue
        lines.extend(_computation(module, comp, comp_names, False, print_operand_shapes, plan))
        lines.append("")
    if entry is None:
        entry = next((c for c in module.computations if c.name == module.entry_computation_name), None)
    if entry is not None:
        lines.extend(_computation(module, entry, comp_names, True, print_operand_shapes, plan))
        lines.append("")
    return "\n".join(lines) + "\n"


def _header(module: hlo_pb2.HloModuleProto) -> str:
    parts = [f"HloModule {module.name}"]
    if module.HasField("schedule") and module.schedule.sequences:
        parts.append("is_scheduled=true")
    if module.input_output_alias.entries:
        items = []
        for e in module.input_output_alias.entries:
            kind = _ALIAS_NAMES.get(e.kind, "may-alias")
            items.append(f"{V.write_shape_index(e.output_shape_index)}: ({e.parameter_number}, "
                         f"{V.write_shape_index(e.parameter_shape_index)}, {kind})")
        parts.append("input_output_alias={ " + ", ".join(items) + " }")
    if module.buffer_donor.entries:
        items = [f"({e.parameter_number}, {V.write_shape_index(e.parameter_shape_index)})"
                 for e in module.buffer_donor.entries]
        parts.append("buffer_donor={ " + ", ".join(items) + " }")
    if module.HasField("host_program_shape"):
        ps = module.host_program_shape
        params = _indexed(print_shape(s) for s in ps.parameters)
        parts.append(f"entry_computation_layout={{({params})->{print_shape(ps.result)}}}")
    if module.frontend_attributes.map:
        parts.append("frontend_attributes=" + V.write_frontend_attributes(module.frontend_attributes))
    return ", ".join(parts)


def _indexed(items) -> str:
    """`a, b, c, d, e, /*index=5*/f`: XLA marks every fifth entry of long lists."""
    return ", ".join(f"/*index={i}*/{x}" if i and i % 5 == 0 else x for i, x in enumerate(items))


def _stack_frames(module: hlo_pb2.HloModuleProto) -> List[str]:
    """XLA's FileNames / FunctionNames / FileLocations / StackFrames tables."""
    index = module.stack_frame_index
    if not module.HasField("stack_frame_index") or index.ByteSize() == 0:
        return []
    out: List[str] = []
    if index.file_names:
        out.append("FileNames")
        out.extend(f"{i} {V.quote(n)}" for i, n in enumerate(index.file_names, 1))
        out.append("")
    if index.function_names:
        out.append("FunctionNames")
        out.extend(f"{i} {V.quote(n)}" for i, n in enumerate(index.function_names, 1))
        out.append("")
    if index.file_locations:
        out.append("FileLocations")
        for i, loc in enumerate(index.file_locations, 1):
            out.append(f"{i} {{file_name_id={loc.file_name_id} function_name_id={loc.function_name_id} "
                       f"line={loc.line} end_line={loc.end_line} column={loc.column} end_column={loc.end_column}}}")
        out.append("")
    if index.stack_frames:
        out.append("StackFrames")
        for i, frame in enumerate(index.stack_frames, 1):
            # XLA's text shows parent_frame_id one above the proto's value (0 = no parent prints 1).
            out.append(f"{i} {{file_location_id={frame.file_location_id} parent_frame_id={frame.parent_frame_id + 1}}}")
        out.append("")
    out.append("")
    return out


def _signature(comp: hlo_pb2.HloComputationProto) -> str:
    ps = comp.program_shape
    params = ", ".join(
        f"{name}: {print_shape(shape, with_layout=False)}"
        for name, shape in zip(ps.parameter_names, ps.parameters)
    )
    return f"({params}) -> {print_shape(ps.result, with_layout=False)}"


def _ordered(module: hlo_pb2.HloModuleProto, comp: hlo_pb2.HloComputationProto) -> Sequence[hlo_pb2.HloInstructionProto]:
    seq = module.schedule.sequences.get(comp.id) if module.HasField("schedule") else None
    if seq is None or len(seq.instruction_ids) != len(comp.instructions):
        return comp.instructions
    by_id = {i.id: i for i in comp.instructions}
    if set(seq.instruction_ids) != set(by_id):
        return comp.instructions
    return [by_id[i] for i in seq.instruction_ids]


def _computation(module: hlo_pb2.HloModuleProto, comp: hlo_pb2.HloComputationProto, comp_names: Dict[int, str],
                 is_entry: bool, operand_shapes: bool, plan: _AsyncPlan) -> List[str]:
    by_id = {i.id: i for i in comp.instructions}
    inst_names = {i.id: i.name for i in comp.instructions}
    head = ("ENTRY " if is_entry else "") + f"%{comp.name} "
    if comp.HasField("program_shape") and len(comp.program_shape.parameter_names) == len(comp.program_shape.parameters):
        head += _signature(comp) + " "
    lines = [head + "{"]
    for inst in _ordered(module, comp):
        wrapped = plan.wrapped.get((comp.id, inst.id))
        lines.append("  " + _instruction(inst, by_id, comp_names, inst_names, inst.id == comp.root_id, operand_shapes,
                                         wrapped))
    tail = "}"
    if comp.execution_thread and comp.execution_thread != "main":
        tail += f", execution_thread={V.quote(comp.execution_thread)}"
    lines.append(tail)
    return lines


def _instruction(inst: hlo_pb2.HloInstructionProto, by_id: Dict[int, hlo_pb2.HloInstructionProto],
                 comp_names: Dict[int, str], inst_names: Dict[int, str], is_root: bool, operand_shapes: bool,
                 wrapped: Optional[hlo_pb2.HloInstructionProto] = None) -> str:
    if inst.opcode == "parameter":
        operands = str(inst.parameter_number)
    elif inst.opcode == "constant":
        operands = print_literal(inst.literal)
    else:
        parts = []
        for oid in inst.operand_ids:
            op = by_id.get(oid)
            if op is None:
                raise ValueError(f"instruction {inst.name!r} has operand id {oid}, which its computation does not have")
            parts.append(f"{print_shape(op.shape)} %{op.name}" if operand_shapes else f"%{op.name}")
        operands = _indexed(parts)
    shapes: List[xla_data_pb2.ShapeProto] = [by_id[o].shape for o in inst.operand_ids if o in by_id]
    ctx = A.WriteContext(comp_names, inst_names, shapes)
    opcode = inst.opcode
    if wrapped is not None and inst.opcode == "async-start":
        opcode = f"{wrapped.opcode}-start"
        attrs = [f"async_execution_thread={V.quote(inst.async_execution_thread)}"] if inst.async_execution_thread else []
        attrs += A.write_attributes(wrapped, ctx)
        attrs += [a for a in A.write_attributes(inst, ctx) if a.startswith("control-predecessors=")]
    else:
        if wrapped is not None:
            opcode = f"{wrapped.opcode}-{inst.opcode[len('async-'):]}"
        attrs = A.write_attributes(inst, ctx)
    text = f"{'ROOT ' if is_root else ''}%{inst.name} = {print_shape(inst.shape)} {opcode}({operands})"
    if attrs:
        text += ", " + ", ".join(attrs)
    return text
