"""Reader of HLO text into xla.HloModuleProto.

The structure (module header, stack-frame sections, computations, instructions, operands) lives
here; attribute values come from the table in attributes.py, shapes from shapes.py, constants from
literals.py.  The proto is filled as XLA's own parser + `HloModule::ToProto` fill it (see
canonical.py for what differs and why), so that a module read from text and one deserialised
from XLA's binary proto are the same module.

Ids follow XLA's parser: computations are numbered 0, 1, ... in proto order (text order, with
the computations made for XLA's async shorthand `negate-start(...)` placed before their caller),
and instruction k of computation c gets id (c << 32) | k, unique module-wide.

As in XLA, operands and called computations must be defined before they are used (so the proto
is in dependency order and calls cannot form cycles); an operand may also be a nested instruction
(`add(f32[2] negate(%x), %x)`), placed before its user under the name `negate.anon`.  Unlike XLA, names are kept as written:
XLA renames an instruction whose name another computation already used (`a` -> `a.1`); we only
require names to be unique within their computation.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from hlo.errors import HloParseError
from hlo.schema import hlo_pb2, xla_data_pb2
from hlo.text import attributes as A
from hlo.text import values as V
from hlo.text.cursor import MAX_LIST, Cursor
from hlo.text.lexer import PUNCT, STRING, WORD, Token
from hlo.text.literals import parse_literal
from hlo.text.infer import INFERRED, InferError, infer_shape
from hlo.opcodes import OPCODES, async_shorthand
from hlo.text.shapes import normalize_shape, parse_shape, print_shape
from hlo.text.types import TYPE_BY_NAME

__all__ = ["parse_hlo_text", "MAX_INSTRUCTIONS"]

log = logging.getLogger(__name__)

#: Bounds on module size (beyond these the input is refused, not processed).
MAX_INSTRUCTIONS = 1 << 22
MAX_COMPUTATIONS = 1 << 18

PT = xla_data_pb2.PrimitiveType
_ALIAS_KINDS = {"may-alias": hlo_pb2.MAY_ALIAS, "must-alias": hlo_pb2.MUST_ALIAS}
# Header attributes that configure XLA's HloModuleConfig; HloModuleProto has no field for them.
_CONFIG_ONLY = {
    "replica_count", "num_partitions", "alias_passthrough_params",
    "allow_spmd_sharding_propagation_to_parameters", "allow_spmd_sharding_propagation_to_output",
    "launch_bounds", "exec_time_optimization_effort", "memory_fitting_effort", "optimization_level",
    "memory_fitting_level", "use_spmd_partitioning", "use_shardy_partitioner", "deduplicate_hlo",
}


def parse_hlo_text(text: str, filename: str = "<string>") -> hlo_pb2.HloModuleProto:
    """Read one HLO module from its text form.

    Raises HloParseError (with file, line and column) for any malformed input; never another
    exception type.
    """
    if not isinstance(text, str):
        raise HloParseError("HLO text must be a str", filename=filename)
    cur = None
    try:
        cur = Cursor(text, filename)
        return _ModuleReader(cur).read()
    except HloParseError:
        raise
    except RecursionError:
        raise HloParseError("input nests too deeply", filename=filename) from None
    except MemoryError:
        raise HloParseError("input too large to read", filename=filename) from None
    except Exception as exc:  # a reader bug must still surface as a parse error, with a position
        log.debug("internal error while reading HLO text", exc_info=True)
        offset = cur.lexer.position if cur is not None else 0
        line, col = cur.lexer.line_col(offset) if cur is not None else (0, 0)
        raise HloParseError(
            f"internal error while reading: {type(exc).__name__}: {exc}",
            filename=filename, line=line, column=col,
        ) from exc


@dataclass
class _PendingInstruction:
    proto: hlo_pb2.HloInstructionProto
    token: Token
    operand_names: List[Tuple[str, Token]]
    given: frozenset
    ctx: A.ReadContext
    #: for XLA's async shorthand `negate-start(...)`: the wrapped instruction, still to be placed
    wrapped: Optional[hlo_pb2.HloInstructionProto] = None
    #: written without a result shape: inferred once the operands are known
    infer: bool = False
    #: how many computations its caller had made for earlier instructions and this one's inline
    #: computations: where XLA places the computation of an async shorthand among them
    wrapped_mark: int = 0


@dataclass
class _Computation:
    proto: hlo_pb2.HloComputationProto
    token: Token
    is_entry: bool
    by_name: Dict[str, hlo_pb2.HloInstructionProto] = field(default_factory=dict)
    pending: List[_PendingInstruction] = field(default_factory=list)
    #: computations made for async shorthands and written inline in this one; they go before it
    #: in the proto, in the order XLA's parser makes them
    wrapped: List["_Computation"] = field(default_factory=list)
    #: async shorthands' computations placed in `wrapped` so far
    async_placed: int = 0
    #: rank in the order computations are completed (XLA's order of definition; a computation may
    #: call only those completed before it); None while its body is being read
    order: Optional[int] = None


class _ModuleReader:
    def __init__(self, cur: Cursor) -> None:
        self.cur = cur
        self.module = hlo_pb2.HloModuleProto()
        self.computations: List[_Computation] = []
        self.comp_by_name: Dict[str, _Computation] = {}
        self.completed = 0
        self.instruction_count = 0
        self.is_scheduled = False
        self.entry_layout: Optional[xla_data_pb2.ProgramShapeProto] = None
        #: names handed out so far, for the names XLA makes up for async shorthands
        self.names_used: Set[str] = set()

    # -- module ------------------------------------------------------------------------------------
    def read(self) -> hlo_pb2.HloModuleProto:
        cur = self.cur
        # XLA's parser also takes computations without the `HloModule` header (its own test files
        # are written so) and names the module `module_<entry computation>`, as here in _finish
        headerless = not cur.at_word("HloModule")
        if not headerless:
            cur.expect_keyword("HloModule", "at start of module")
            self.module.name = cur.expect_name("as module name")
            cur.accept(":")  # `HloModule name:`, which XLA's lexer reads as a label
            while cur.accept(","):
                self._read_header_attribute()
        self._read_stack_frame_sections()
        while not cur.at_eof():
            self._read_computation()
        if not self.computations:
            raise cur.error("", expected="a computation")
        self._finish()
        return self.module

    def _read_header_attribute(self) -> None:
        cur = self.cur
        key = cur.expect_word("in module header", "a module attribute")
        cur.expect("=", f"after module attribute {key.text}")
        m = self.module
        if key.text == "is_scheduled":
            self.is_scheduled = cur.expect_bool("as is_scheduled")
        elif key.text == "entry_computation_layout":
            cur.expect("{", "to open entry_computation_layout")
            self.entry_layout = self._read_program_shape(named=False)
            cur.expect("}", "to close entry_computation_layout")
        elif key.text == "input_output_alias":
            self._read_input_output_alias()
        elif key.text == "buffer_donor":
            self._read_buffer_donor()
        elif key.text == "frontend_attributes":
            V.read_frontend_attributes(cur, m.frontend_attributes)
        elif key.text == "spmd_output_sharding":
            V.read_sharding(cur, m.spmd_output_sharding)
        elif key.text == "spmd_parameters_shardings":
            cur.expect("{", "to open spmd_parameters_shardings")
            while not cur.accept("}"):
                V.read_sharding(cur, m.spmd_parameters_shardings.add())
                cur.accept(",")
        elif key.text == "use_auto_spmd_partitioning":
            m.use_auto_spmd_partitioning = cur.expect_bool("as use_auto_spmd_partitioning")
        elif key.text in _CONFIG_ONLY:
            self._skip_value(key)
            log.debug("module attribute %s has no HloModuleProto field; dropped", key.text)
        else:
            raise cur.fail(f"unknown module attribute '{key.text}'", key)

    def _skip_value(self, key: Token) -> None:
        cur = self.cur
        if cur.at_punct("{"):
            cur.lexer.raw_balanced()
            return
        tok = cur.next()
        if tok.kind not in (WORD, STRING):
            raise cur.error(f"as value of {key.text}", tok, expected="a value")

    def _read_input_output_alias(self) -> None:
        """`{ {0}: (0, {}, may-alias), {1}: (1, {1}) }`."""
        cur = self.cur
        alias = self.module.input_output_alias

        def entry() -> None:
            e = alias.entries.add()
            e.output_shape_index.extend(V.read_shape_index(cur))
            cur.expect(":", "after output shape index")
            cur.expect("(", "to open aliased parameter")
            e.parameter_number = cur.expect_int64("as parameter number")
            cur.expect(",", "after parameter number")
            e.parameter_shape_index.extend(V.read_shape_index(cur))
            e.kind = hlo_pb2.MAY_ALIAS
            if cur.accept(","):
                tok = cur.expect_word("as alias kind", "may-alias or must-alias")
                if tok.text not in _ALIAS_KINDS:
                    raise cur.fail(f"unknown alias kind '{tok.text}'", tok)
                e.kind = _ALIAS_KINDS[tok.text]
            cur.expect(")", "to close aliased parameter")

        cur.delimited(entry, "input_output_alias")

    def _read_buffer_donor(self) -> None:
        """`{ (0, {}), (1, {}) }`."""
        cur = self.cur
        donor = self.module.buffer_donor

        def entry() -> None:
            e = donor.entries.add()
            cur.expect("(", "to open buffer donor")
            e.parameter_number = cur.expect_int64("as parameter number")
            cur.expect(",", "after parameter number")
            e.parameter_shape_index.extend(V.read_shape_index(cur))
            cur.expect(")", "to close buffer donor")

        cur.delimited(entry, "buffer_donor")

    # -- stack frames ------------------------------------------------------------------------------
    def _read_stack_frame_sections(self) -> None:
        """The FileNames / FunctionNames / FileLocations / StackFrames tables XLA prints."""
        cur = self.cur
        index = self.module.stack_frame_index
        sections = {"FileNames", "FunctionNames", "FileLocations", "StackFrames"}
        while cur.peek().kind == WORD and cur.peek().text in sections:
            mark = cur.lexer.save()
            title = cur.next()
            nxt = cur.peek()
            if not (nxt.kind == WORD and nxt.text.isdigit()):
                # a computation that happens to be named like a section
                cur.lexer.restore(mark)
                return
            sections.discard(title.text)
            count = 0
            while cur.peek().kind == WORD and cur.peek().text.isdigit():
                num_tok = cur.peek()
                number = cur.expect_int("as table index", 1, MAX_LIST)
                count += 1
                if number != count:
                    raise cur.fail(f"{title.text} entry {number} out of order (expected {count})", num_tok)
                if title.text == "FileNames":
                    index.file_names.append(cur.expect_text("as file name"))
                elif title.text == "FunctionNames":
                    index.function_names.append(cur.expect_text("as function name"))
                elif title.text == "FileLocations":
                    loc = index.file_locations.add()
                    self._read_int_fields(loc, {"file_name_id": 0, "function_name_id": 0, "line": 0,
                                                "end_line": 0, "column": 0, "end_column": 0})
                else:
                    frame = index.stack_frames.add()
                    self._read_int_fields(frame, {"file_location_id": 0, "parent_frame_id": -1})

    def _read_int_fields(self, msg, fields: Dict[str, int]) -> None:
        """`{a=1 b=2}`: int32 fields; `fields` maps name -> offset added to the text value."""
        cur = self.cur
        cur.expect("{", "to open table entry")
        while not cur.accept("}"):
            key = cur.expect_word("in table entry", "a field name")
            if key.text not in fields:
                raise cur.fail(f"unknown field '{key.text}'", key)
            cur.expect("=", f"after {key.text}")
            value = cur.expect_int(f"as {key.text}", -(1 << 31), (1 << 31) - 1) + fields[key.text]
            if not -(1 << 31) <= value < (1 << 31):
                raise cur.fail(f"{key.text} out of range", key)
            setattr(msg, key.text, value)
            cur.accept(",")

    # -- shapes ----------------------------------------------------------------------------------
    def _read_program_shape(self, named: bool) -> xla_data_pb2.ProgramShapeProto:
        """`(a: f32[2], b: s32[]) -> f32[2]` (named) or `(f32[2]{0}, s32[])->f32[2]{0}`."""
        cur = self.cur
        ps = xla_data_pb2.ProgramShapeProto()

        def parameter() -> None:
            if named:
                ps.parameter_names.append(cur.expect_name("as parameter name"))
                cur.expect(":", "after parameter name")
            ps.parameters.append(parse_shape(cur))

        cur.delimited(parameter, "parameter list", "(", ")")
        cur.expect("->", "after parameter list")
        ps.result.CopyFrom(parse_shape(cur))
        return ps

    # -- computations ------------------------------------------------------------------------------
    def _read_computation(self) -> None:
        cur = self.cur
        is_entry = cur.accept_word("ENTRY")
        tok = cur.peek()
        name = cur.expect_name("as computation name")
        if name in self.comp_by_name:
            raise cur.fail(f"computation '{name}' defined twice", tok)
        if is_entry and any(c.is_entry for c in self.computations):
            raise cur.fail("a second ENTRY computation", tok)
        comp = self._new_computation(name, tok, is_entry)
        signature: Optional[xla_data_pb2.ProgramShapeProto] = None
        if cur.at_punct("("):
            signature = self._read_program_shape(named=True)  # XLA derives it from the body, and checks
        root = self._read_body(comp)
        if cur.accept(","):
            cur.expect_keyword("execution_thread", "after computation")
            cur.expect("=", "after execution_thread")
            comp.proto.execution_thread = cur.expect_text("as execution thread")
        self._complete(comp, root)
        if signature is not None:
            self._check_signature(comp, signature)

    def _new_computation(self, name: str, tok: Token, is_entry: bool) -> _Computation:
        if len(self.computations) >= MAX_COMPUTATIONS:
            raise self.cur.fail("too many computations", tok)
        comp = _Computation(hlo_pb2.HloComputationProto(), tok, is_entry)
        comp.proto.name = name
        comp.proto.id = len(self.computations)
        self.computations.append(comp)
        self.comp_by_name[name] = comp
        return comp

    def _read_body(self, comp: _Computation) -> hlo_pb2.HloInstructionProto:
        """`{ instruction ... }`; returns the root (ROOT, else the last instruction, as in XLA)."""
        cur = self.cur
        cur.expect("{", "to open computation body")
        root: Optional[hlo_pb2.HloInstructionProto] = None
        while not cur.accept("}"):
            inst, is_root = self._read_instruction(comp)
            if is_root:
                if root is not None:
                    raise cur.fail(f"computation '{comp.proto.name}' has two ROOT instructions")
                root = inst
        if not comp.proto.instructions:
            raise cur.fail(f"computation '{comp.proto.name}' has no instructions", comp.token)
        return root if root is not None else comp.proto.instructions[-1]

    def _complete(self, comp: _Computation, root: hlo_pb2.HloInstructionProto) -> None:
        comp.proto.root_id = root.id
        comp.order = self.completed
        self.completed += 1
        self._resolve_computation(comp)

    def _read_inline(self, caller: _Computation) -> str:
        """A computation written inline as an attribute's value (`to_apply={ ... }`): XLA's parser
        reads its instructions in a scope of their own, names it `_` (made unique as XLA's module
        makes computation names unique: `_`, `_.1`, ...) and defines it before its caller."""
        tok = self.cur.peek()
        if len(self.computations) >= MAX_COMPUTATIONS:
            raise self.cur.fail("too many computations", tok)
        comp = _Computation(hlo_pb2.HloComputationProto(name="_"), tok, False)
        comp.proto.id = len(self.computations)
        self.computations.append(comp)
        with self.cur.nested():
            root = self._read_body(comp)
        key = self._generated_key(comp)
        self.comp_by_name[key] = comp
        self._complete(comp, root)
        caller.wrapped.append(comp)
        return key

    @staticmethod
    def _generated_key(comp: _Computation) -> str:
        """The key under which a computation XLA's parser names itself (`_`, `async_wrapped`) is
        found while reading (`#` is in no name HLO text can write); its name is made unique with
        the others' at the end, in XLA's order (_uniquify_names)."""
        return f"{comp.proto.name}#{comp.proto.id}"

    def _read_instruction(self, comp: _Computation) -> Tuple[hlo_pb2.HloInstructionProto, bool]:
        """`[ROOT] name = shape opcode(operands), attr=value, ...`."""
        cur = self.cur
        is_root = cur.accept_word("ROOT")
        name_tok = cur.peek()
        name = cur.expect_name("as instruction name")
        if name in comp.by_name:
            raise cur.fail(f"instruction '{name}' defined twice in computation '{comp.proto.name}'", name_tok)
        cur.expect("=", "after instruction name")
        # XLA lets the result shape out for opcodes whose shape it infers (hlo/text/infer.py)
        shape = None if self._at_opcode() else parse_shape(cur)
        return self._read_rhs(comp, name, name_tok, shape), is_root

    def _at_opcode(self) -> bool:
        """Does an opcode follow (`add(`), not a shape (`f32[`, `(`, `b(`)?"""
        tok = self.cur.peek()
        return tok.kind == WORD and tok.text in OPCODES and tok.text not in TYPE_BY_NAME and \
            self.cur.lexer.text.startswith("(", self.cur.lexer.offset_after_peek())

    def _read_rhs(self, comp: _Computation, name: Optional[str], name_tok: Token,
                  shape: Optional[xla_data_pb2.ShapeProto]) -> hlo_pb2.HloInstructionProto:
        """Opcode, operands and attributes; the instruction is placed in `comp` after its operands,
        so that nested instructions (`add(f32[2] negate(x), x)`, name None) come first."""
        cur = self.cur
        self.instruction_count += 1
        if self.instruction_count > MAX_INSTRUCTIONS:
            raise cur.fail("too many instructions", name_tok)
        inst = hlo_pb2.HloInstructionProto()
        if shape is not None:
            inst.shape.CopyFrom(shape)
        op_tok = cur.expect_word("after instruction shape", "an opcode")
        if shape is None and op_tok.text not in INFERRED:
            raise cur.fail(f"instruction '{name}' has no result shape, and the result shape of "
                           f"{op_tok.text} is not inferred here: write it (inferred for "
                           f"{', '.join(sorted(INFERRED))})", op_tok)
        wrapped_opcode, async_part = async_shorthand(op_tok.text)
        if op_tok.text not in OPCODES and wrapped_opcode is None:
            raise cur.fail(f"unknown opcode '{op_tok.text}'", op_tok)
        if name is not None:
            self.names_used.add(name)
        inst.opcode = op_tok.text if wrapped_opcode is None else f"async-{async_part}"
        wrapped: Optional[hlo_pb2.HloInstructionProto] = None
        if async_part == "start":
            # XLA's shorthand for an async-start wrapping one instruction: its attributes
            # belong to the wrapped instruction, which _wrap_async places in a computation.
            wrapped = hlo_pb2.HloInstructionProto(opcode=wrapped_opcode)
        ctx = A.ReadContext(cur, wrapped if wrapped is not None else inst, [],
                            read_inline=lambda: self._read_inline(comp))
        operand_names: List[Tuple[str, Token]] = []
        paren = cur.lexer.save()
        cur.expect("(", f"after opcode {inst.opcode}")
        if inst.opcode == "parameter":
            inst.parameter_number = cur.expect_int("as parameter number", 0, MAX_LIST)
            cur.expect(")", "after parameter number")
        elif inst.opcode == "constant":
            inst.literal.CopyFrom(parse_literal(cur, inst.shape))
            cur.expect(")", "after constant value")
        else:
            cur.lexer.restore(paren)

            def operand() -> None:
                operand_shape = parse_shape(cur) if self._at_shape() else None
                tok = cur.peek()
                if operand_shape is not None and self._at_nested_instruction():
                    with cur.nested():  # XLA's nested instruction: `f32[2] negate(%x)`
                        nested = self._read_rhs(comp, None, tok, operand_shape)
                    operand_names.append((nested.name, tok))
                    return
                operand_names.append((cur.expect_name("as operand"), tok))

            cur.delimited(operand, "operand list", "(", ")", after_item="after operand")
        given: Set[str] = set()
        specs = A.specs_for(inst.opcode if wrapped is None else wrapped.opcode)
        if wrapped is not None:
            specs = dict(specs, async_execution_thread=A.specs_for("async-start")["async_execution_thread"])
        while name is not None and cur.accept(","):  # a nested instruction takes no attributes
            key = cur.expect_word("after ','", "an attribute name")
            spec = specs.get(key.text)
            if spec is None:
                raise cur.fail(f"unknown attribute '{key.text}' for opcode {inst.opcode}", key)
            if key.text in given:
                raise cur.fail(f"attribute '{key.text}' given twice", key)
            given.add(key.text)
            cur.expect("=", f"after attribute {key.text}")
            if wrapped is not None and key.text == "async_execution_thread":
                spec.kind.read(A.ReadContext(cur, inst, []), spec)
            else:
                spec.kind.read(ctx, spec)
        for message in (inst, wrapped) if wrapped is not None else (inst,):
            message.metadata.SetInParent()
            message.frontend_attributes.SetInParent()
            message.statistics_viz.SetInParent()
        if wrapped is not None:
            # XLA keeps these on both the async-start and the wrapped instruction
            inst.metadata.CopyFrom(wrapped.metadata)
            inst.frontend_attributes.CopyFrom(wrapped.frontend_attributes)
            inst.backend_config = wrapped.backend_config
        placed = comp.proto.instructions.add()
        placed.CopyFrom(inst)
        placed.name = name if name is not None else self._unique_name(f"{inst.opcode}.anon", comp)
        placed.id = (comp.proto.id << 32) | (len(comp.proto.instructions) - 1)
        if placed.name in comp.by_name:
            raise cur.fail(f"instruction '{placed.name}' defined twice in computation '{comp.proto.name}'", name_tok)
        comp.by_name[placed.name] = placed
        ctx.inst = placed if wrapped is None else wrapped
        comp.pending.append(_PendingInstruction(placed, name_tok, operand_names, frozenset(given), ctx, wrapped,
                                                infer=shape is None, wrapped_mark=len(comp.wrapped)))
        return placed

    def _at_nested_instruction(self) -> bool:
        """After an operand's shape: an opcode and '(' (a nested instruction), not a name?"""
        tok = self.cur.peek()
        if tok.kind != WORD or (tok.text not in OPCODES and async_shorthand(tok.text)[0] is None):
            return False
        lexer = self.cur.lexer
        return lexer.text.startswith("(", lexer.offset_after_peek())

    def _at_shape(self) -> bool:
        """Does an operand start with its shape (`f32[2]{0} %x`, `(f32[], s32[]) %t`)?"""
        tok = self.cur.peek()
        if tok.kind == PUNCT and tok.text == "(":
            return True
        if tok.kind == WORD and tok.text == "b":  # a buffer shape `b(f32[2])`, or an operand named b
            return self.cur.lexer.text.startswith("(", self.cur.lexer.offset_after_peek())
        if tok.kind != WORD or tok.text not in TYPE_BY_NAME:
            return False
        mark = self.cur.lexer.save()
        self.cur.next()
        is_shape = self.cur.at_punct("[")
        self.cur.lexer.restore(mark)
        return is_shape

    def _resolve_computation(self, comp: _Computation) -> None:
        """Operands and control predecessors by name, then XLA's defaults, then the signature."""
        cur = self.cur
        for p in comp.pending:
            inst = p.proto
            for name, tok in p.operand_names:
                target = comp.by_name.get(name)
                if target is None:
                    raise cur.fail(f"operand '{name}' is not defined in computation '{comp.proto.name}'", tok)
                if target.id >= inst.id:
                    # as in XLA: operands come first, so the proto is in dependency order
                    raise cur.fail(f"operand '{name}' is used before it is defined", tok)
                inst.operand_ids.append(target.id)
            for names, tok in p.ctx.control_refs:
                for name in names:
                    target = comp.by_name.get(name)
                    if target is None:
                        raise cur.fail(f"control predecessor '{name}' is not defined in computation '{comp.proto.name}'", tok)
                    inst.control_predecessor_ids.append(target.id)
            operand_shapes = [comp.by_name[n].shape for n, _ in p.operand_names]
            if p.wrapped is not None:
                self._wrap_async(comp, p, operand_shapes)
                continue
            missing = A.apply_defaults(inst, p.given, operand_shapes)
            if missing is not None:
                raise cur.fail(f"instruction '{inst.name}' ({inst.opcode}) needs attribute '{missing}'", p.token)
            if p.infer:
                self._infer_shape(comp, p, operand_shapes)
            if inst.opcode == "outfeed" and not inst.HasField("outfeed_shape") and operand_shapes:
                inst.outfeed_shape.CopyFrom(operand_shapes[0])
        params = sorted((i for i in comp.proto.instructions if i.opcode == "parameter"), key=lambda i: i.parameter_number)
        for expected, inst in enumerate(params):
            if inst.parameter_number != expected:
                raise cur.fail(
                    f"computation '{comp.proto.name}' parameters are not numbered 0..{len(params) - 1} "
                    f"(found {inst.parameter_number})", comp.token)
        ps = comp.proto.program_shape
        for inst in params:
            ps.parameters.add().CopyFrom(inst.shape)
            ps.parameter_names.append(inst.name)
        root = next(i for i in comp.proto.instructions if i.id == comp.proto.root_id)
        ps.result.CopyFrom(root.shape)

    def _infer_shape(self, comp: _Computation, p: _PendingInstruction,
                     operand_shapes: List[xla_data_pb2.ShapeProto]) -> None:
        """The result shape XLA's parser would infer, from the operands and the called
        computations (defined before, as XLA requires, so their result shapes are known)."""
        called: List[xla_data_pb2.ShapeProto] = []
        for names, _slot, tok in sorted(p.ctx.computation_refs, key=lambda r: -1 if r[1] is None else r[1]):
            for callee_name in names:
                callee = self.comp_by_name.get(callee_name)
                if callee is None or callee is comp or callee.order is None:
                    raise self.cur.fail(f"computation '{callee_name}' must be defined before '{p.proto.name}' "
                                        "to infer its result shape", tok)
                called.append(callee.proto.program_shape.result)
        try:
            p.proto.shape.CopyFrom(infer_shape(p.proto, operand_shapes, called))
        except InferError as exc:
            raise self.cur.fail(f"cannot infer the result shape of '{p.proto.name}': {exc}", p.token) from None

    def _check_inherited(self, comp: _Computation, p: _PendingInstruction) -> None:
        """async-update and async-done inherit the wrapped computation and thread of their start:
        as in XLA, `calls=` and `async_execution_thread=` written on them must agree with the
        start's and are not stored (XLA's proto has them on the start only)."""
        by_id = {i.id: i for i in comp.proto.instructions}
        start = p.proto
        for _ in range(len(comp.proto.instructions)):
            if start.opcode == "async-start" or not start.operand_ids or start.operand_ids[0] not in by_id:
                break
            start = by_id[start.operand_ids[0]]
        if start.opcode != "async-start":
            raise self.cur.fail(f"{p.proto.opcode} '{p.proto.name}' does not take the value of an async-start "
                                "(or of an async-update of one)", p.token)
        for names, _slot, tok in p.ctx.computation_refs:
            target = self.comp_by_name.get(names[0])
            if target is None or list(start.called_computation_ids) != [target.proto.id]:
                raise self.cur.fail(f"{p.proto.opcode} '{p.proto.name}' names computation '{names[0]}', its "
                                    f"async-start '{start.name}' wraps another", tok)
        if p.proto.async_execution_thread and p.proto.async_execution_thread != start.async_execution_thread:
            raise self.cur.fail(f"{p.proto.opcode} '{p.proto.name}' names thread "
                                f"'{p.proto.async_execution_thread}', its async-start '{start.name}' runs on "
                                f"'{start.async_execution_thread}'", p.token)
        p.proto.ClearField("async_execution_thread")

    def _propagate_execution_threads(self) -> None:
        """As XLA: computations called from a computation on a named thread run on that thread, and
        an async-start's wrapped computation runs on the start's thread."""
        by_id = {c.proto.id: c.proto for c in self.computations}
        for c in self.computations:
            for inst in c.proto.instructions:
                if inst.opcode == "async-start" and inst.async_execution_thread:
                    for cid in inst.called_computation_ids:
                        callee = by_id.get(cid)
                        if callee is not None and not callee.execution_thread:
                            callee.execution_thread = inst.async_execution_thread
        work = [c.proto for c in self.computations if c.proto.execution_thread]
        while work:
            comp = work.pop()
            for inst in comp.instructions:
                for cid in inst.called_computation_ids:
                    callee = by_id.get(cid)
                    if callee is not None and not callee.execution_thread:
                        callee.execution_thread = comp.execution_thread
                        work.append(callee)

    # -- XLA's async shorthand ---------------------------------------------------------------------
    def _unique_name(self, base: str, comp: Optional[_Computation] = None) -> str:
        """XLA's way with made-up names: `base`, then `base.1`, `base.2`, ..."""
        name, n = base, 0
        while name in self.names_used or name in self.comp_by_name or (comp is not None and name in comp.by_name):
            n += 1
            name = f"{base}.{n}"
        self.names_used.add(name)
        return name

    def _wrap_async(self, caller: _Computation, p: _PendingInstruction, operand_shapes: List[xla_data_pb2.ShapeProto]) -> None:
        """`%s = (...) negate-start(%x)` -> async-start calling a new computation `async_wrapped`
        whose parameters `async_param` feed one `negate`, as XLA's parser builds it."""
        cur = self.cur
        start, wrapped = p.proto, p.wrapped
        assert wrapped is not None
        if start.shape.element_type != PT.TUPLE or len(start.shape.tuple_shapes) < 2:
            raise cur.fail(f"async shorthand '{start.name}' needs a tuple shape (operands, output, ...)", p.token)
        comp = _Computation(hlo_pb2.HloComputationProto(name="async_wrapped"), p.token, False)
        comp.proto.id = len(self.computations)
        comp.proto.execution_thread = start.async_execution_thread
        self.computations.append(comp)
        self.comp_by_name[self._generated_key(comp)] = comp
        comp.order = self.completed
        self.completed += 1
        # XLA makes it after the wrapped instruction's inline computations, before later ones'
        caller.wrapped.insert(p.wrapped_mark + caller.async_placed, comp)
        caller.async_placed += 1
        for number, shape in enumerate(operand_shapes):
            param = comp.proto.instructions.add(name="async_param", opcode="parameter", parameter_number=number)
            param.id = (comp.proto.id << 32) | number
            param.shape.CopyFrom(shape)
            for field_name in ("metadata", "frontend_attributes", "statistics_viz"):
                getattr(param, field_name).SetInParent()
        inner = comp.proto.instructions.add()
        inner.CopyFrom(wrapped)
        inner.name = wrapped.opcode  # all names are made unique at the end, as XLA does
        inner.id = (comp.proto.id << 32) | len(operand_shapes)
        inner.shape.CopyFrom(start.shape.tuple_shapes[1])
        inner.operand_ids.extend(i.id for i in comp.proto.instructions[:-1])
        comp.proto.root_id = inner.id
        missing = A.apply_defaults(inner, p.given - {"async_execution_thread"}, operand_shapes)
        if missing is not None:
            raise cur.fail(f"instruction '{start.name}' ({wrapped.opcode}-start) needs attribute '{missing}'", p.token)
        ps = comp.proto.program_shape
        for param in comp.proto.instructions[:-1]:
            ps.parameters.add().CopyFrom(param.shape)
            ps.parameter_names.append(param.name)
        ps.result.CopyFrom(inner.shape)
        start.called_computation_ids.append(comp.proto.id)
        # the wrapped instruction's called computations (e.g. to_apply) resolve with the module's
        comp.pending.append(_PendingInstruction(inner, p.token, [], p.given, A.ReadContext(
            cur, inner, [], p.ctx.computation_refs, [])))
        p.ctx.computation_refs = []

    def _check_signature(self, comp: _Computation, signature: xla_data_pb2.ProgramShapeProto) -> None:
        """As XLA: the written result shape must agree with the root's (layouts aside); the written
        parameters are not checked (XLA takes the body's: its own tests have signatures listing
        parameters the body no longer has, or other shapes)."""
        body = comp.proto.program_shape
        declared, actual = signature.result, body.result
        if not _same_shape(declared, actual):
            raise self.cur.fail(f"computation '{comp.proto.name}' declares shape {print_shape(declared, False)} "
                                f"where its body has {print_shape(actual, False)}", comp.token)

    # -- whole module ------------------------------------------------------------------------------
    def _uniquify_names(self) -> None:
        """Computation names, and instruction names across the module, made unique as XLA's
        module does when the parser adds the computations (two NameUniquers, in XLA's order of
        the computations); names are unique within a computation already, except the ones XLA's
        parser makes up (`_`, `async_wrapped`, `async_param`, the wrapped opcode)."""
        computation_names, instruction_names = _NameUniquer(), _NameUniquer()
        for comp in self._placement_order():
            comp.proto.name = computation_names.unique(comp.proto.name)
            renamed = False
            for inst in comp.proto.instructions:
                new = instruction_names.unique(inst.name)
                if new != inst.name:
                    inst.name = new
                    renamed = True
            if renamed:
                ps = comp.proto.program_shape
                params = sorted((i for i in comp.proto.instructions if i.opcode == "parameter"),
                                key=lambda i: i.parameter_number)
                del ps.parameter_names[:]
                ps.parameter_names.extend(i.name for i in params)

    def _placement_order(self) -> List[_Computation]:
        """Computations in XLA's proto order: each one's inline and async-shorthand computations
        (recursively) just before it, the others in text order."""
        out: List[_Computation] = []
        inner = {id(w) for c in self.computations for w in c.wrapped}

        def place(comp: _Computation) -> None:
            for callee in comp.wrapped:
                place(callee)
            out.append(comp)

        for comp in self.computations:
            if id(comp) not in inner:
                place(comp)
        return out

    def _finish(self) -> None:
        cur = self.cur
        m = self.module
        self._uniquify_names()
        for comp in self.computations:
            for p in comp.pending:
                if p.proto.opcode in ("async-update", "async-done"):
                    self._check_inherited(comp, p)
                    continue
                for names, slot, tok in p.ctx.computation_refs:
                    ids = []
                    for name in names:
                        target = self.comp_by_name.get(name)
                        if target is None:
                            raise cur.fail(f"computation '{name}' is not defined", tok)
                        if target is comp:
                            raise cur.fail(f"computation '{name}' calls itself", tok)
                        if target.order is None or comp.order is None or target.order > comp.order:
                            # as in XLA: callees come first, so calls cannot form cycles
                            raise cur.fail(f"computation '{name}' is used before it is defined", tok)
                        ids.append(target.proto.id)
                    called = p.proto.called_computation_ids
                    if slot is None:
                        called.extend(ids)
                    else:
                        while len(called) <= slot:
                            called.append(-1)
                        if called[slot] != -1:
                            raise cur.fail("two attributes name the same called computation", tok)
                        called[slot] = ids[0]
                called = p.proto.called_computation_ids
                if any(c == -1 for c in called):
                    raise cur.fail(f"instruction '{p.proto.name}' is missing a called computation", p.token)
                if p.proto.opcode == "fusion":
                    for cid in called:
                        self.computations[cid].proto.is_fusion_computation = True
        self._propagate_execution_threads()
        entry = next((c for c in self.computations if c.is_entry), self.computations[-1])
        m.entry_computation_name = entry.proto.name
        if not m.name:
            m.name = f"module_{entry.proto.name}"
        for comp in self._placement_order():
            m.computations.append(comp.proto)
        if any(c.wrapped for c in self.computations):
            _renumber_in_list_order(m)
        m.entry_computation_id = next(c.id for c in m.computations if c.name == entry.proto.name)
        host = m.host_program_shape
        if self.entry_layout is not None:
            layout = self.entry_layout
            eps = entry.proto.program_shape
            if len(layout.parameters) != len(eps.parameters):
                # XLA's parser keeps such a signature as written (its compiler then fails on it);
                # the module's meaning is its entry computation, whose parameters are explicit.
                log.warning("entry_computation_layout has %d parameters, entry computation %s has %d: "
                            "the signature is kept as written, the entry computation's parameters decide",
                            len(layout.parameters), entry.proto.name, len(eps.parameters))
            host.CopyFrom(layout)
        else:
            host.parameters.extend(entry.proto.program_shape.parameters)
            host.result.CopyFrom(entry.proto.program_shape.result)
        del host.parameter_names[:]
        host.parameter_names.extend(f"p{i}" for i in range(len(host.parameters)))
        for shape in list(host.parameters) + [host.result]:
            normalize_shape(shape)
        if self.is_scheduled:
            for comp in m.computations:
                if comp.is_fusion_computation:
                    continue
                m.schedule.sequences[comp.id].instruction_ids.extend(i.id for i in comp.instructions)
        m.input_output_alias.SetInParent()
        m.buffer_donor.SetInParent()
        m.frontend_attributes.SetInParent()


class _NameUniquer:
    """XLA's NameUniquer: a name whose root (the part before a numeric `.N` suffix) already holds
    that number takes the next free one (`add.1` twice: `add.1`, `add.0`; `a` twice: `a`, `a.1`)."""

    def __init__(self) -> None:
        self.used: Dict[str, Set[int]] = {}
        self.counters: Dict[str, int] = {}

    def unique(self, name: str) -> str:
        root, dot, suffix = name.rpartition(".")
        has_suffix = bool(dot) and suffix.isdigit()
        if not has_suffix:
            root, number = name, 0
        else:
            number = int(suffix)
        taken = self.used.setdefault(root, set())
        while number in taken:
            number = self.counters.get(root, 0)
            self.counters[root] = number + 1
        taken.add(number)
        return f"{root}.{number}" if number or has_suffix else root


def _renumber_in_list_order(module: hlo_pb2.HloModuleProto) -> None:
    """Give computations ids 0, 1, ... in list order (and instructions (c << 32) | k), as if the
    computations XLA makes for async shorthands had been written out before their callers."""
    new_comp = {c.id: n for n, c in enumerate(module.computations)}

    def inst_id(old: int) -> int:
        return (new_comp[old >> 32] << 32) | (old & 0xFFFFFFFF)

    for comp in module.computations:
        for inst in comp.instructions:
            inst.id = inst_id(inst.id)
            inst.operand_ids[:] = [inst_id(i) for i in inst.operand_ids]
            inst.control_predecessor_ids[:] = [inst_id(i) for i in inst.control_predecessor_ids]
            inst.called_computation_ids[:] = [new_comp[i] for i in inst.called_computation_ids]
        comp.root_id = inst_id(comp.root_id)
        comp.id = new_comp[comp.id]


def _same_shape(a: xla_data_pb2.ShapeProto, b: xla_data_pb2.ShapeProto) -> bool:
    """Equal as shapes, layouts aside."""
    if a.element_type != b.element_type or list(a.dimensions) != list(b.dimensions):
        return False
    if any(a.is_dynamic_dimension) != any(b.is_dynamic_dimension) or (
            any(a.is_dynamic_dimension) and list(a.is_dynamic_dimension) != list(b.is_dynamic_dimension)):
        return False
    return len(a.tuple_shapes) == len(b.tuple_shapes) and all(
        _same_shape(x, y) for x, y in zip(a.tuple_shapes, b.tuple_shapes))
