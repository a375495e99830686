"""The canonical form under which two modules are "the same module", and the fingerprint built on it.

HLO text does not carry everything a proto can hold, and readers number things their own way, so
equality of a text round trip (or of our reading vs XLA's) is defined on this form:

1. Ids are bookkeeping.  Computations are put in name order and instructions of each
   computation in name order; ids are renumbered in that order (computation k gets id k,
   instructions get 0, 1, ... module-wide), and every reference (operand_ids,
   control_predecessor_ids, called_computation_ids, root_id, entry_computation_id, schedule
   keys and entries) is rewritten accordingly.  Schedules keep their order: that is meaning.
2. The module's `id` (a process-unique counter) is cleared: text never prints it.
3. Fields that text cannot carry are cleared (see TEXT_CANNOT_CARRY): an instruction's
   `dot_sparsity` / `sparsity_config` (XLA's `sparsity=` text is read and dropped), and
   module-level fields XLA does not print (`cross_program_prefetches`, `profile_info`,
   `device_assignment`, `is_dynamic`, `payloads`...).
4. The stack-frame index is rebuilt: each instruction's `metadata.stack_frame_id` is resolved to
   its whole call chain (file, function, line, columns of every frame up to the root) and the
   tables are re-interned in order of first use.  XLA's own parser re-interns the tables the same
   way (dropping unused frames and reordering files), so only the chains carry meaning.
5. A computation's `program_shape.parameter_names` are the names of its parameter
   instructions: XLA rebuilds them that way whenever it builds an HloModule (so does our reader);
   a framework's builder may have stored other names (torch_xla stores "x" for `%x.25`), which
   no text form carries.
6. A custom-call's `custom_call_api_version` API_VERSION_UNSPECIFIED counts as
   API_VERSION_ORIGINAL: XLA prints UNSPECIFIED but its parser refuses it, so the printer leaves
   it out and every reader (ours, XLA's) then fills ORIGINAL.
7. What XLA fills when it loads a proto is filled where missing (the defaults of the attribute
   table, e.g. DEFAULT operand precisions, group counts of 1, a compare's comparison type, the
   empty sparsity_config of a convolution; for shapes the default layout, the tail padding
   alignment of 1 and all-false is_dynamic_dimension; the host_program_shape, from the entry
   computation): a framework's builder may leave them unset, and text written from such a proto
   reads back with them set.
8. Empty-but-present submessages are made present: XLA's ToProto always writes `metadata`,
   `frontend_attributes`, `statistics_viz` on instructions and `input_output_alias`,
   `buffer_donor`, `frontend_attributes` on the module; presence alone carries no meaning.

Everything else (names, opcodes, shapes with layouts, literals, every attribute field,
program shapes, host_program_shape, stack frames, aliasing) must be equal.
"""
from __future__ import annotations

import hashlib
from typing import Dict, Tuple, Union

from hlo.schema import hlo_pb2
from hlo.text import attributes
from hlo.text.shapes import normalize_shape

__all__ = ["canonical_module", "fingerprint", "modules_equal", "TEXT_CANNOT_CARRY"]

#: (message, field) pairs that HLO text does not round-trip; cleared by canonical_module.
TEXT_CANNOT_CARRY: Tuple[Tuple[str, str], ...] = (
    ("HloModuleProto", "id"),
    ("HloModuleProto", "pjrt_id"),
    ("HloModuleProto", "cross_program_prefetches"),
    ("HloModuleProto", "profile_info"),
    ("HloModuleProto", "device_assignment"),
    ("HloModuleProto", "is_dynamic"),
    ("HloModuleProto", "payloads"),
    ("HloModuleProto", "original_value_recovery_table"),
    ("HloModuleProto", "device_type"),
    ("HloInstructionProto", "dot_sparsity"),
    ("HloInstructionProto", "sparsity_config"),
)


def _clear(msg, field: str) -> None:
    if field in msg.DESCRIPTOR.fields_by_name:
        msg.ClearField(field)


def canonical_module(module: hlo_pb2.HloModuleProto, fill_defaults: bool = True) -> hlo_pb2.HloModuleProto:
    """A renumbered, normalised copy of `module` (the input is not changed).

    `fill_defaults=False` skips step 7, for comparisons that must see whether a reader filled
    XLA's defaults itself (tests of our parser against XLA's).
    """
    src = hlo_pb2.HloModuleProto()
    src.CopyFrom(module)
    for msg_name, field in TEXT_CANNOT_CARRY:
        if msg_name == "HloModuleProto":
            _clear(src, field)
    if fill_defaults:
        _fill_xla_defaults(src)
    comps = sorted(src.computations, key=lambda c: c.name)
    comp_ids: Dict[int, int] = {c.id: k for k, c in enumerate(comps)}
    inst_ids: Dict[Tuple[int, int], int] = {}
    counter = 0
    ordered = []
    for comp in comps:
        insts = sorted(comp.instructions, key=lambda i: i.name)
        for inst in insts:
            inst_ids[(comp.id, inst.id)] = counter
            counter += 1
        ordered.append((comp, insts))

    out = hlo_pb2.HloModuleProto()
    out.CopyFrom(src)
    del out.computations[:]
    for comp, insts in ordered:
        old = comp.id
        new = out.computations.add()
        new.CopyFrom(comp)
        del new.instructions[:]
        for inst in insts:
            ni = new.instructions.add()
            ni.CopyFrom(inst)
            for msg_name, field in TEXT_CANNOT_CARRY:
                if msg_name == "HloInstructionProto":
                    _clear(ni, field)
            ni.id = inst_ids[(old, inst.id)]
            for name in ("operand_ids", "control_predecessor_ids"):
                values = [inst_ids.get((old, v), -1 - v) for v in getattr(ni, name)]
                ni.ClearField(name)
                getattr(ni, name).extend(values)
            called = [comp_ids.get(v, -1 - v) for v in ni.called_computation_ids]
            ni.ClearField("called_computation_ids")
            ni.called_computation_ids.extend(called)
            if ni.opcode == "custom-call" and ni.custom_call_api_version == 0:
                ni.custom_call_api_version = hlo_pb2.API_VERSION_ORIGINAL
            ni.metadata.SetInParent()
            ni.frontend_attributes.SetInParent()
            ni.statistics_viz.SetInParent()
        params = sorted((i for i in insts if i.opcode == "parameter"), key=lambda i: i.parameter_number)
        if len(params) == len(new.program_shape.parameter_names):
            new.program_shape.ClearField("parameter_names")
            new.program_shape.parameter_names.extend(i.name for i in params)
        new.id = comp_ids[old]
        new.root_id = inst_ids.get((old, comp.root_id), -1)
    out.entry_computation_id = comp_ids.get(src.entry_computation_id, -1)
    if src.HasField("schedule"):
        out.ClearField("schedule")
        for cid, seq in src.schedule.sequences.items():
            if cid not in comp_ids:
                continue
            out.schedule.sequences[comp_ids[cid]].instruction_ids.extend(
                inst_ids.get((cid, i), -1) for i in seq.instruction_ids)
    _reintern_stack_frames(out)
    out.input_output_alias.SetInParent()
    out.buffer_donor.SetInParent()
    out.frontend_attributes.SetInParent()
    return out


def _frame_chain(index: hlo_pb2.StackFrameIndexProto, frame_id: int) -> Tuple:
    """The call chain of a 1-based frame id, innermost first, as plain tuples."""
    chain = []
    seen = set()
    while 0 < frame_id <= len(index.stack_frames) and frame_id not in seen:
        seen.add(frame_id)
        frame = index.stack_frames[frame_id - 1]
        loc_id = frame.file_location_id
        if 0 < loc_id <= len(index.file_locations):
            loc = index.file_locations[loc_id - 1]
            fname = index.file_names[loc.file_name_id - 1] if 0 < loc.file_name_id <= len(index.file_names) else ""
            func = (index.function_names[loc.function_name_id - 1]
                    if 0 < loc.function_name_id <= len(index.function_names) else "")
            chain.append((fname, func, loc.line, loc.column, loc.end_line, loc.end_column))
        else:
            chain.append(("", "", 0, 0, 0, 0))
        frame_id = frame.parent_frame_id
    return tuple(chain)


def _reintern_stack_frames(module: hlo_pb2.HloModuleProto) -> None:
    old = hlo_pb2.StackFrameIndexProto()
    old.CopyFrom(module.stack_frame_index)
    new = hlo_pb2.StackFrameIndexProto()
    files: Dict[str, int] = {}
    funcs: Dict[str, int] = {}
    locs: Dict[Tuple, int] = {}
    frames: Dict[Tuple, int] = {}

    def intern_chain(chain: Tuple) -> int:
        if not chain:
            return 0
        if chain in frames:
            return frames[chain]
        parent = intern_chain(chain[1:])
        fname, func, line, col, end_line, end_col = chain[0]
        if fname not in files:
            new.file_names.append(fname)
            files[fname] = len(new.file_names)
        if func not in funcs:
            new.function_names.append(func)
            funcs[func] = len(new.function_names)
        key = (files[fname], funcs[func], line, col, end_line, end_col)
        if key not in locs:
            loc = new.file_locations.add()
            (loc.file_name_id, loc.function_name_id, loc.line, loc.column, loc.end_line, loc.end_column) = key
            locs[key] = len(new.file_locations)
        frame = new.stack_frames.add()
        frame.file_location_id = locs[key]
        frame.parent_frame_id = parent
        frames[chain] = len(new.stack_frames)
        return frames[chain]

    for comp in module.computations:
        for inst in comp.instructions:
            if inst.metadata.stack_frame_id:
                inst.metadata.stack_frame_id = intern_chain(_frame_chain(old, inst.metadata.stack_frame_id))
    module.ClearField("stack_frame_index")
    if new.ByteSize():
        module.stack_frame_index.CopyFrom(new)


def _fill_xla_defaults(module: hlo_pb2.HloModuleProto) -> None:
    """Step 7 of the module docstring, in place."""
    for comp in module.computations:
        shapes = {i.id: i.shape for i in comp.instructions}
        for inst in comp.instructions:
            normalize_shape(inst.shape)
            if inst.HasField("literal"):
                _normalize_literal_shapes(inst.literal)
            for shape in inst.operand_shapes_with_layout:
                normalize_shape(shape)
            if inst.HasField("outfeed_shape"):
                normalize_shape(inst.outfeed_shape)
        for inst in comp.instructions:
            attributes.fill_defaults(inst, [shapes[o] for o in inst.operand_ids if o in shapes])
        if comp.HasField("program_shape"):
            for shape in list(comp.program_shape.parameters) + [comp.program_shape.result]:
                normalize_shape(shape)
    if not module.HasField("host_program_shape"):  # XLA derives it from the entry on load
        entry = next((c for c in module.computations if c.id == module.entry_computation_id), None)
        if entry is not None and entry.HasField("program_shape"):
            host = module.host_program_shape
            host.parameters.extend(entry.program_shape.parameters)
            host.result.CopyFrom(entry.program_shape.result)
            host.parameter_names.extend(f"p{i}" for i in range(len(host.parameters)))
    if module.HasField("host_program_shape"):
        for shape in list(module.host_program_shape.parameters) + [module.host_program_shape.result]:
            normalize_shape(shape)


def _normalize_literal_shapes(literal) -> None:
    normalize_shape(literal.shape)
    for sub in literal.tuple_literals:
        _normalize_literal_shapes(sub)


ModuleLike = Union[hlo_pb2.HloModuleProto, "HloModule"]  # noqa: F821  (hlo.ir.module.HloModule)


def _as_proto(module: ModuleLike) -> hlo_pb2.HloModuleProto:
    return module if isinstance(module, hlo_pb2.HloModuleProto) else module.to_proto()


def modules_equal(a: ModuleLike, b: ModuleLike) -> bool:
    """True when two modules (IR or proto) are the same module: equal canonical forms, XLA's
    load-time defaults filled, so a module read from text equals its binary proto."""
    return canonical_module(_as_proto(a)) == canonical_module(_as_proto(b))


def fingerprint(module: ModuleLike) -> str:
    """Hex SHA-256 of the canonical form's deterministic serialisation: the compile cache's key.

    Defaults are not filled here: that is 40% of the canonical form's cost, the cache lookup is on
    every first call of a graph, and a graph comes back from its framework in the same form."""
    data = canonical_module(_as_proto(module), fill_defaults=False).SerializeToString(deterministic=True)
    return hashlib.sha256(data).hexdigest()
