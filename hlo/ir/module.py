"""The in-memory IR: modules, computations and instructions.

Why a graph of objects over the proto: the compiler walks operands, users and called computations,
and rewrites instructions; doing that on ids inside protobuf messages would spread id bookkeeping
through every pass. The structure (names, opcodes, shapes, operand, callee and control edges) is
lifted into Python objects; every other field of XLA's instruction, computation and module protos
stays in a typed protobuf message (`attributes`), readable as attributes of the object
(`inst.dimensions`, `inst.dot_dimension_numbers`, `inst.metadata.source_line`). The conversion to
and from HloModuleProto (hlo/ir/convert.py) is therefore lossless.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hlo.ir.shape import Shape
from hlo.schema import hlo_pb2

_INSTRUCTION_FIELDS = frozenset(f.name for f in hlo_pb2.HloInstructionProto.DESCRIPTOR.fields)
_COMPUTATION_FIELDS = frozenset(f.name for f in hlo_pb2.HloComputationProto.DESCRIPTOR.fields)
_MODULE_FIELDS = frozenset(f.name for f in hlo_pb2.HloModuleProto.DESCRIPTOR.fields)


class _AttributeView:
    """Reads fields of the `attributes` message as if they were the object's own attributes."""

    _fields: frozenset[str] = frozenset()
    attributes: Any

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails; never recurse through `attributes` itself.
        if name != "attributes" and name in type(self)._fields:
            return getattr(self.attributes, name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")


def metadata_frames(md: Any, module_proto: Any = None):
    """"file:line" of each recorded frame of an instruction's metadata, innermost first.

    JAX writes a `stack_frame_id` into the module's stack frame index (`module_proto`), whose
    frames chain by `parent_frame_id` (bounded: a malformed index may loop); torch_xla
    (XLA_IR_DEBUG/XLA_HLO_DEBUG) writes the innermost frame as `source_file`/`source_line` and,
    beside it, the whole stack into that index. The whole stack is read when there is one: the
    innermost frame of an op made by library code (a kernel's custom-call, made in this package's
    torch_xla adapter) is the library's line, and the user's line is further out."""
    index = module_proto.stack_frame_index if module_proto is not None else None
    if md.stack_frame_id and index is not None and 0 < md.stack_frame_id <= len(index.stack_frames):
        yield from _index_frames(index, md.stack_frame_id)
        return
    if md.source_file:
        yield f"{md.source_file}:{md.source_line}" if md.source_line else md.source_file


def _index_frames(index: Any, frame_id: int):
    """"file:line" of frame `frame_id` of a stack frame index and of its callers, innermost first."""
    for _ in range(len(index.stack_frames)):
        if not 0 < frame_id <= len(index.stack_frames):
            return
        frame = index.stack_frames[frame_id - 1]
        if 0 < frame.file_location_id <= len(index.file_locations):
            loc = index.file_locations[frame.file_location_id - 1]
            if 0 < loc.file_name_id <= len(index.file_names):
                yield f"{index.file_names[loc.file_name_id - 1]}:{loc.line}"
        frame_id = frame.parent_frame_id


class HloInstruction(_AttributeView):
    """One HLO instruction: an opcode applied to operand instructions, producing `shape`."""

    _fields = _INSTRUCTION_FIELDS

    def __init__(
        self,
        name: str,
        opcode: str,
        shape: Shape,
        operands: list[HloInstruction] | None = None,
        *,
        called_computations: list[HloComputation] | None = None,
        control_predecessors: list[HloInstruction] | None = None,
        attributes: hlo_pb2.HloInstructionProto | None = None,
        id: int | None = None,
    ) -> None:
        self.name = name
        self.opcode = opcode
        self.shape = shape
        self.operands: list[HloInstruction] = list(operands or [])
        self.called_computations: list[HloComputation] = list(called_computations or [])
        self.control_predecessors: list[HloInstruction] = list(control_predecessors or [])
        self.attributes = attributes if attributes is not None else hlo_pb2.HloInstructionProto()
        self.id = id
        self.parent: HloComputation | None = None

    @property
    def frontend_attributes_dict(self) -> dict[str, str]:
        return dict(self.attributes.frontend_attributes.map)

    @property
    def source_location(self) -> str:
        """"file:line" of the user's code that made this instruction, or "" if none was recorded.

        torch_xla writes `source_file`/`source_line` into the metadata; JAX writes a
        `stack_frame_id` into the module's stack frame index instead (innermost frame first).
        """
        return next(self.source_frames(), "")

    def source_frames(self):
        """"file:line" of each recorded frame that made this instruction, innermost first
        (`metadata_frames`)."""
        module = self.parent.module if self.parent is not None else None
        return metadata_frames(self.attributes.metadata,
                               module.attributes if module is not None else None)

    def constant_value(self):
        """The NumPy value of a `constant` instruction (a tuple of values for tuple constants)."""
        from hlo.ir.literal import literal_to_numpy

        return literal_to_numpy(self.attributes.literal, where=f"constant {self.name}")

    def __repr__(self) -> str:
        ops = ", ".join(o.name for o in self.operands)
        return f"<HloInstruction {self.name} = {self.shape} {self.opcode}({ops})>"


class HloComputation(_AttributeView):
    """A computation: instructions in a valid (post-)order and the one whose value it returns."""

    _fields = _COMPUTATION_FIELDS

    def __init__(
        self,
        name: str,
        instructions: list[HloInstruction] | None = None,
        root: HloInstruction | None = None,
        *,
        attributes: hlo_pb2.HloComputationProto | None = None,
        id: int | None = None,
    ) -> None:
        self.name = name
        self.instructions: list[HloInstruction] = []
        self.root = root
        self.attributes = attributes if attributes is not None else hlo_pb2.HloComputationProto()
        self.id = id
        self.module: HloModule | None = None
        for inst in instructions or []:
            self.add(inst)

    def add(self, inst: HloInstruction) -> HloInstruction:
        inst.parent = self
        self.instructions.append(inst)
        return inst

    def replace_uses(self, old: HloInstruction, new: HloInstruction) -> None:
        """Every operand edge to `old` in this computation (and the root) points to `new` (a
        rewrite's last step; `old` is left in place, unread, for dead-code removal)."""
        for user in self.instructions:
            if any(o is old for o in user.operands):
                user.operands = [new if o is old else o for o in user.operands]
        if self.root is old:
            self.root = new

    @property
    def parameters(self) -> list[HloInstruction]:
        """Parameter instructions ordered by parameter number."""
        params = [i for i in self.instructions if i.opcode == "parameter"]
        return sorted(params, key=lambda i: i.attributes.parameter_number)

    def instruction(self, name: str) -> HloInstruction:
        for inst in self.instructions:
            if inst.name == name:
                return inst
        raise KeyError(f"computation {self.name} has no instruction {name!r}")

    def users(self) -> dict[HloInstruction, list[HloInstruction]]:
        """Each instruction's users within this computation (computed, since edges can change)."""
        result: dict[HloInstruction, list[HloInstruction]] = {i: [] for i in self.instructions}
        for inst in self.instructions:
            for op in inst.operands:
                result[op].append(inst)
        return result

    def __repr__(self) -> str:
        return f"<HloComputation {self.name}: {len(self.instructions)} instructions>"


class HloModule(_AttributeView):
    """A module: computations (callees before callers, as XLA orders them) and the entry."""

    _fields = _MODULE_FIELDS

    def __init__(
        self,
        name: str,
        computations: list[HloComputation] | None = None,
        entry: HloComputation | None = None,
        *,
        attributes: hlo_pb2.HloModuleProto | None = None,
        id: int = 0,
    ) -> None:
        self.name = name
        self.computations: list[HloComputation] = []
        self.entry = entry
        self.attributes = attributes if attributes is not None else hlo_pb2.HloModuleProto()
        self.id = id
        for comp in computations or []:
            self.add(comp)

    def add(self, comp: HloComputation) -> HloComputation:
        comp.module = self
        self.computations.append(comp)
        return comp

    def computation(self, name: str) -> HloComputation:
        for comp in self.computations:
            if comp.name == name:
                return comp
        raise KeyError(f"module {self.name} has no computation {name!r}")

    def instructions(self) -> Iterator[HloInstruction]:
        for comp in self.computations:
            yield from comp.instructions

    # -- the forms (conversion lives in convert.py, the text grammar in hlo.text) ---------------
    def to_proto(self) -> hlo_pb2.HloModuleProto:
        from hlo.ir.convert import module_to_proto

        return module_to_proto(self)

    def to_bytes(self) -> bytes:
        """Binary HloModuleProto, deterministic so that equal modules give equal bytes."""
        return self.to_proto().SerializeToString(deterministic=True)

    def to_pbtxt(self) -> str:
        """Protobuf text form, as NEURON_FRAMEWORK_DEBUG dumps and LoweringContext.hlo_text() give."""
        from google.protobuf import text_format

        return text_format.MessageToString(self.to_proto())

    def to_text(self) -> str:
        """HLO text, in the style of XLA's printer; XLA's parser reads it back."""
        from hlo.text.printer import print_hlo_text

        return print_hlo_text(self.to_proto())

    def fingerprint(self) -> str:
        """SHA-256 of the canonical form: equal for modules that differ only in ids."""
        from hlo.canonical import fingerprint

        return fingerprint(self)

    def __repr__(self) -> str:
        return f"<HloModule {self.name}: {len(self.computations)} computations>"
