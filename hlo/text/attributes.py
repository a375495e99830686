"""The one table of instruction attributes, read by the parser and written by the printer.

Each row says: the attribute's spelling in HLO text, the proto field it lives in (a dotted path
into HloInstructionProto), its value kind (how to read and write it), the opcodes that take it, and
whether XLA requires it.  The order of the rows is the order the printer writes attributes in,
which follows XLA's printer: opcode-specific attributes, called computations, generic ones
(sharding, frontend attributes, control predecessors), then metadata and backend_config.

Defaults that XLA's parser fills when an attribute is absent (e.g. the comparison type of a
compare, DEFAULT operand precisions of a dot) are part of the kinds, so that a module read from
text has the fields XLA's own `ToProto` would write.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple

import numpy as np
from google.protobuf.message import Message

from hlo.schema import hlo_pb2, xla_data_pb2
from hlo.text import values as V
from hlo.text.cursor import Cursor
from hlo.text.lexer import STRING, WORD, Token
from hlo.text.literals import format_float
from hlo.text.shapes import parse_shape, print_shape
from hlo.text.types import FLOAT_TYPES, SIGNED_TYPES, COMPLEX_TYPES

__all__ = ["AttrSpec", "ReadContext", "WriteContext", "ATTRIBUTES", "specs_for", "apply_defaults", "write_attributes"]

Inst = hlo_pb2.HloInstructionProto
PT = xla_data_pb2.PrimitiveType


@dataclass
class ReadContext:
    """What an attribute reader may need beyond the tokens: the instruction and name resolution."""

    cur: Cursor
    inst: Inst
    operand_shapes: List[xla_data_pb2.ShapeProto]
    #: record computation names to resolve once all computations are known: (names, slot, token)
    #: where slot is an index into called_computation_ids or None for "append all".
    computation_refs: List[Tuple[List[str], Optional[int], Token]] = field(default_factory=list)
    #: record control-predecessor names to resolve at the end of the computation.
    control_refs: List[Tuple[List[str], Token]] = field(default_factory=list)


@dataclass
class WriteContext:
    """Id -> name maps and operand shapes the writers need."""

    computation_names: Dict[int, str]
    instruction_names: Dict[int, str]
    operand_shapes: List[xla_data_pb2.ShapeProto]

    def computation_name(self, cid: int) -> str:
        if cid not in self.computation_names:
            raise ValueError(f"reference to computation id {cid}, which the module does not have")
        return self.computation_names[cid]

    def instruction_name(self, iid: int) -> str:
        if iid not in self.instruction_names:
            raise ValueError(f"reference to instruction id {iid}, which its computation does not have")
        return self.instruction_names[iid]


# -- field paths ------------------------------------------------------------------------------------
def _get(msg: Message, path: str):
    """Value at a dotted path; None when a submessage on the way is absent."""
    parts = path.split(".")
    for part in parts[:-1]:
        if not msg.HasField(part):
            return None
        msg = getattr(msg, part)
    return getattr(msg, parts[-1])


def _parent(msg: Message, path: str) -> Tuple[Message, str]:
    """The message holding the last field of `path` (submessages created on the way)."""
    parts = path.split(".")
    for part in parts[:-1]:
        msg = getattr(msg, part)
    return msg, parts[-1]


def _has_message(msg: Message, path: str) -> bool:
    parts = path.split(".")
    for part in parts:
        if not msg.HasField(part):
            return False
        msg = getattr(msg, part)
    return True


# -- kinds --------------------------------------------------------------------------------------------
class Kind:
    """How one attribute value is read, written and defaulted."""

    def read(self, ctx: ReadContext, spec: "AttrSpec") -> None:
        raise NotImplementedError

    def write(self, inst: Inst, spec: "AttrSpec", ctx: WriteContext) -> Optional[str]:
        """The value text, or None to leave the attribute out."""
        raise NotImplementedError

    def default(self, inst: Inst, spec: "AttrSpec", operand_shapes: Sequence[xla_data_pb2.ShapeProto]) -> None:
        """Fill what XLA fills when the attribute is absent (most kinds: nothing)."""


class IntKind(Kind):
    def __init__(self, omit: Optional[Tuple[int, ...]] = (0,), default: Optional[int] = None, lo: int = -(1 << 63),
                 hi: int = (1 << 63) - 1) -> None:
        self.omit, self.default_value, self.lo, self.hi = omit, default, lo, hi

    def read(self, ctx, spec):
        parent, name = _parent(ctx.inst, spec.field)
        setattr(parent, name, ctx.cur.expect_int(f"as value of {spec.name}", self.lo, self.hi))

    def write(self, inst, spec, ctx):
        value = _get(inst, spec.field)
        if value is None or (self.omit is not None and value in self.omit):
            return None
        return str(value)

    def default(self, inst, spec, operand_shapes):
        if self.default_value is not None and not _get(inst, spec.field):
            parent, name = _parent(inst, spec.field)
            setattr(parent, name, self.default_value)


class OptionalIntKind(IntKind):
    """An int in a proto oneof: written only when set (0 is a real value)."""

    def __init__(self) -> None:
        super().__init__(omit=None)

    def write(self, inst, spec, ctx):
        parent, name = _parent(inst, spec.field)
        return str(getattr(parent, name)) if parent.HasField(name) else None


class FirstOfListKind(Kind):
    """A scalar attribute stored as the only element of a repeated field (iota_dimension)."""

    def read(self, ctx, spec):
        parent, name = _parent(ctx.inst, spec.field)
        getattr(parent, name).append(ctx.cur.expect_int64(f"as value of {spec.name}"))

    def write(self, inst, spec, ctx):
        values = _get(inst, spec.field)
        return str(values[0]) if values else None


class BoolKind(Kind):
    def read(self, ctx, spec):
        parent, name = _parent(ctx.inst, spec.field)
        setattr(parent, name, ctx.cur.expect_bool(f"as value of {spec.name}"))

    def write(self, inst, spec, ctx):
        return "true" if _get(inst, spec.field) else None


class FloatKind(Kind):
    def read(self, ctx, spec):
        parent, name = _parent(ctx.inst, spec.field)
        setattr(parent, name, ctx.cur.expect_float(f"as value of {spec.name}"))

    def write(self, inst, spec, ctx):
        value = _get(inst, spec.field)
        if value is None:
            return None
        return format_float(value, np.float32)  # proto `float`: print as XLA prints a float


class IntListKind(Kind):
    def __init__(self, always: bool = False) -> None:
        self.always = always

    def read(self, ctx, spec):
        parent, name = _parent(ctx.inst, spec.field)
        target = getattr(parent, name)
        del target[:]
        target.extend(ctx.cur.int_list(f"as value of {spec.name}"))

    def write(self, inst, spec, ctx):
        values = _get(inst, spec.field)
        if values is None or (not values and not self.always):
            return None
        return "{" + ",".join(str(v) for v in values) + "}"


class BoolListKind(Kind):
    """`{true,false}` (parameter_replication)."""

    def read(self, ctx, spec):
        cur = ctx.cur
        parent, name = _parent(ctx.inst, spec.field)
        target = getattr(parent, name)
        cur.expect("{", f"to open {spec.name}")
        while not cur.accept("}"):
            target.append(cur.expect_bool(f"in {spec.name}"))
            cur.accept(",")

    def write(self, inst, spec, ctx):
        values = _get(inst, spec.field)
        if not values:
            return None
        return "{" + ",".join("true" if v else "false" for v in values) + "}"


class TextKind(Kind):
    """A quoted string into a `string` field."""

    def __init__(self, always: bool = False) -> None:
        self.always = always

    def read(self, ctx, spec):
        parent, name = _parent(ctx.inst, spec.field)
        setattr(parent, name, ctx.cur.expect_text(f"as value of {spec.name}"))

    def write(self, inst, spec, ctx):
        value = _get(inst, spec.field)
        if value is None or (not value and not self.always):
            return None
        return V.quote(value)


class BytesKind(Kind):
    """A quoted string into a `bytes` field; `raw_braces` also takes `{...}` as raw text (JSON)."""

    def __init__(self, raw_braces: bool = False) -> None:
        self.raw_braces = raw_braces

    def read(self, ctx, spec):
        parent, name = _parent(ctx.inst, spec.field)
        cur = ctx.cur
        if self.raw_braces and cur.at_punct("{"):
            raw, _ = cur.lexer.raw_balanced()
            setattr(parent, name, raw.encode("utf-8", "surrogatepass"))
            return
        tok = cur.expect_string(f"as value of {spec.name}")
        setattr(parent, name, tok.value)

    def write(self, inst, spec, ctx):
        value = _get(inst, spec.field)
        if not value:
            return None
        if self.raw_braces and V.reads_back_raw(value):
            return value.decode("utf-8")  # XLA prints `{...}` configs (JSON, MLIR dicts) unquoted
        return V.escape(value)


class EnumKind(Kind):
    """A bare word mapped to a proto enum value or string (direction=LT, distribution=rng_uniform)."""

    def __init__(self, mapping: Dict[str, object], omit: Tuple[object, ...] = (), default: Optional[object] = None) -> None:
        self.mapping = mapping
        self.reverse = {v: k for k, v in mapping.items()}
        self.omit = omit
        self.default_value = default

    def default(self, inst, spec, operand_shapes):
        if self.default_value is not None:
            parent, name = _parent(inst, spec.field)
            if not getattr(parent, name):
                setattr(parent, name, self.default_value)

    def read(self, ctx, spec):
        cur = ctx.cur
        tok = cur.peek()
        word = tok.text if tok.kind == WORD else (tok.value.decode("utf-8", "replace") if tok.kind == STRING else None)
        if word is None or word not in self.mapping:
            shown = ", ".join(sorted(self.mapping)[:8])
            raise cur.error(f"as value of {spec.name}", tok, expected=f"one of {shown}")
        cur.next()
        parent, name = _parent(ctx.inst, spec.field)
        setattr(parent, name, self.mapping[word])

    def write(self, inst, spec, ctx):
        value = _get(inst, spec.field)
        if value is None or value in self.omit or value not in self.reverse:
            return None
        return self.reverse[value]


class ComparisonTypeKind(EnumKind):
    """`type=TOTALORDER`; when absent XLA uses the default for the operands' element type."""

    def __init__(self) -> None:
        super().__init__({t: t for t in ("FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED")})

    @staticmethod
    def implied(operand_shapes: Sequence[xla_data_pb2.ShapeProto]) -> str:
        if not operand_shapes:
            return ""
        et = operand_shapes[0].element_type
        if et in FLOAT_TYPES or et in COMPLEX_TYPES:
            return "FLOAT"
        if et in SIGNED_TYPES:
            return "SIGNED"
        return "UNSIGNED"

    def write(self, inst, spec, ctx):
        value = inst.comparison_type
        if not value or value == self.implied(ctx.operand_shapes):
            return None
        return value

    def default(self, inst, spec, operand_shapes):
        if not inst.comparison_type:
            inst.comparison_type = self.implied(operand_shapes)


class PrecisionKind(Kind):
    """`operand_precision={default,highest}`; XLA fills DEFAULT for every operand when absent."""

    _NAMES = {n.lower(): v for n, v in xla_data_pb2.PrecisionConfig.Precision.items()}

    def read(self, ctx, spec):
        cur = ctx.cur
        cur.expect("{", "to open operand_precision")
        target = ctx.inst.precision_config.operand_precision
        del target[:]
        while not cur.accept("}"):
            tok = cur.expect_word("in operand_precision", "default, high or highest")
            if tok.text.lower() not in self._NAMES:
                raise cur.fail(f"unknown precision '{tok.text}'", tok)
            target.append(self._NAMES[tok.text.lower()])
            if len(target) > 1024:
                raise cur.fail("too many precisions")
            cur.accept(",")

    def write(self, inst, spec, ctx):
        if not inst.HasField("precision_config"):
            return None
        values = inst.precision_config.operand_precision
        if all(v == 0 for v in values):
            return None
        names = {v: k for k, v in self._NAMES.items()}
        return "{" + ",".join(names.get(v, "default") for v in values) + "}"

    def default(self, inst, spec, operand_shapes):
        if not inst.precision_config.operand_precision:
            inst.precision_config.operand_precision.extend([0] * len(inst.operand_ids))


class DotAlgorithmKind(EnumKind):
    """`algorithm=dot_bf16_bf16_f32` into precision_config.algorithm."""

    def __init__(self) -> None:
        mapping = {n[4:].lower(): v for n, v in xla_data_pb2.PrecisionConfig.Algorithm.items() if n.startswith("ALG_")}
        super().__init__(mapping, omit=(0,))


class GroupCountKind(IntKind):
    def __init__(self) -> None:
        super().__init__(omit=(0, 1), default=1, lo=1)  # 0 (unset in a proto) means 1


class ComputationKind(Kind):
    """`to_apply=%add`: one called computation at a fixed slot of called_computation_ids."""

    def __init__(self, slot: int = 0, when: Optional[Callable[[Inst, WriteContext], bool]] = None) -> None:
        self.slot = slot
        self.when = when

    def read(self, ctx, spec):
        tok = ctx.cur.peek()
        name = ctx.cur.expect_name(f"as value of {spec.name}")
        ctx.computation_refs.append(([name], self.slot, tok))

    def write(self, inst, spec, ctx):
        ids = inst.called_computation_ids
        if len(ids) <= self.slot or (self.when is not None and not self.when(inst, ctx)):
            return None
        if self.slot == 0 and spec.name in ("to_apply", "calls") and len(ids) != 1:
            return None
        return "%" + ctx.computation_name(ids[self.slot])


class ComputationListKind(Kind):
    """`branch_computations={%a, %b}`: all called computations, in order."""

    def __init__(self, when: Optional[Callable[[Inst, WriteContext], bool]] = None) -> None:
        self.when = when

    def read(self, ctx, spec):
        cur = ctx.cur
        tok = cur.peek()
        names = cur.delimited(lambda: cur.expect_name(f"in {spec.name}"), spec.name, limit=1 << 16)
        ctx.computation_refs.append((names, None, tok))

    def write(self, inst, spec, ctx):
        if self.when is not None and not self.when(inst, ctx):
            return None
        ids = inst.called_computation_ids
        return "{" + ", ".join("%" + ctx.computation_name(i) for i in ids) + "}"


class ControlPredecessorsKind(Kind):
    def read(self, ctx, spec):
        cur = ctx.cur
        tok = cur.peek()
        names = cur.delimited(lambda: cur.expect_name("in control-predecessors"), "control-predecessors")
        ctx.control_refs.append((names, tok))

    def write(self, inst, spec, ctx):
        ids = inst.control_predecessor_ids
        if not ids:
            return None
        return "{" + ", ".join("%" + ctx.instruction_name(i) for i in ids) + "}"


class MessageKind(Kind):
    """A structured value read/written by a function pair from values.py on a submessage."""

    def __init__(self, reader: Callable[[Cursor, Message], None], writer: Callable[[Message], str],
                 present: Optional[Callable[[Message], bool]] = None) -> None:
        self.reader, self.writer, self.present = reader, writer, present

    def read(self, ctx, spec):
        parent, name = _parent(ctx.inst, spec.field)
        sub = getattr(parent, name)
        sub.Clear()
        self.reader(ctx.cur, sub)
        sub.SetInParent()

    def write(self, inst, spec, ctx):
        if not _has_message(inst, spec.field):
            return None
        sub = _get(inst, spec.field)
        if self.present is not None and not self.present(sub):
            return None
        return self.writer(sub)


class InstKind(Kind):
    """A value whose reader/writer work on the whole instruction (slice, replica groups...)."""

    def __init__(self, reader: Callable[[Cursor, Inst], None], writer: Callable[[Inst], str],
                 present: Callable[[Inst], bool]) -> None:
        self.reader, self.writer, self.present = reader, writer, present

    def read(self, ctx, spec):
        self.reader(ctx.cur, ctx.inst)

    def write(self, inst, spec, ctx):
        return self.writer(inst) if self.present(inst) else None


class OperandLayoutsKind(Kind):
    """custom-call `operand_layout_constraints={f32[2]{0}, ...}` (sets constrain_layout)."""

    def read(self, ctx, spec):
        shapes = V.read_shape_list(ctx.cur)
        ctx.inst.constrain_layout = True
        del ctx.inst.operand_shapes_with_layout[:]
        ctx.inst.operand_shapes_with_layout.extend(shapes)

    def write(self, inst, spec, ctx):
        if not inst.constrain_layout:
            return None
        return V.write_shape_list(inst.operand_shapes_with_layout)


class DomainKind(Kind):
    """`domain={kind="sharding", entry={...}, exit={...}}` of a domain instruction."""

    def read(self, ctx, spec):
        cur = ctx.cur
        cur.expect("{", "to open domain")
        while not cur.accept("}"):
            key = cur.expect_word("in domain", "kind, entry or exit")
            cur.expect("=", "after domain field")
            if key.text == "kind":
                cur.expect_text("as domain kind")
            # XLA's proto holds the text's `entry` in domain_exit_sharding and vice versa
            elif key.text == "entry":
                V.read_sharding(cur, ctx.inst.domain_exit_sharding)
            elif key.text == "exit":
                V.read_sharding(cur, ctx.inst.domain_entry_sharding)
            else:
                raise cur.fail(f"unknown domain field '{key.text}'", key)
            cur.accept(",")

    def write(self, inst, spec, ctx):
        if not (inst.HasField("domain_entry_sharding") or inst.HasField("domain_exit_sharding")):
            return None
        return ('{kind="sharding", entry=' + V.write_sharding(inst.domain_exit_sharding)
                + ", exit=" + V.write_sharding(inst.domain_entry_sharding) + "}")


class SkippedKind(Kind):
    """Attributes XLA prints that the schema cannot hold in this form; read and dropped."""

    def read(self, ctx, spec):
        cur = ctx.cur
        if cur.at_punct("{"):
            cur.lexer.raw_balanced()
        elif cur.peek().kind == STRING:
            cur.next()
        else:
            cur.lexer.raw_run()

    def write(self, inst, spec, ctx):
        return None


class PresentKind(SkippedKind):
    """Read and dropped from text; XLA's ToProto writes the (empty) submessage, so do we."""

    def default(self, inst, spec, operand_shapes):
        getattr(inst, spec.field).SetInParent()


class ResultAccuracyKind(Kind):
    """`result_accuracy={mode=highest}` or `{tolerance={atol=0,rtol=0,ulps=1}}`."""

    def read(self, ctx, spec):
        cur = ctx.cur
        ra = ctx.inst.result_accuracy
        cur.expect("{", "to open result_accuracy")
        key = cur.expect_word("in result_accuracy", "mode or tolerance")
        cur.expect("=", "after result_accuracy field")
        if key.text == "mode":
            tok = cur.expect_word("as result_accuracy mode", "default or highest")
            modes = {n.lower(): v for n, v in xla_data_pb2.ResultAccuracy.Mode.items()}
            if tok.text.lower() not in modes:
                raise cur.fail(f"unknown result accuracy mode '{tok.text}'", tok)
            ra.mode = modes[tok.text.lower()]
        elif key.text == "tolerance":
            cur.expect("{", "to open tolerance")
            while not cur.accept("}"):
                k = cur.expect_word("in tolerance", "atol, rtol or ulps")
                cur.expect("=", "after tolerance field")
                if k.text in ("atol", "rtol"):
                    setattr(ra.tolerance, k.text, cur.expect_float(f"as {k.text}"))
                elif k.text == "ulps":
                    ra.tolerance.ulps = cur.expect_int64("as ulps")
                else:
                    raise cur.fail(f"unknown tolerance field '{k.text}'", k)
                cur.accept(",")
            ra.tolerance.SetInParent()
        else:
            raise cur.fail(f"unknown result_accuracy field '{key.text}'", key)
        cur.expect("}", "to close result_accuracy")

    def write(self, inst, spec, ctx):
        if not inst.HasField("result_accuracy"):
            return None
        ra = inst.result_accuracy
        if ra.HasField("tolerance"):
            t = ra.tolerance
            atol, rtol = format_float(t.atol, np.float64), format_float(t.rtol, np.float64)
            return f"{{tolerance={{atol={atol},rtol={rtol},ulps={t.ulps}}}}}"
        if ra.mode:
            return "{mode=" + xla_data_pb2.ResultAccuracy.Mode.Name(ra.mode).lower() + "}"
        return None


# -- the table ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AttrSpec:
    """One attribute: text name, proto field path, value kind, the opcodes taking it (None: all)."""

    name: str
    field: str
    kind: Kind
    opcodes: Optional[FrozenSet[str]] = None
    required: bool = False


def _ops(*names: str) -> FrozenSet[str]:
    return frozenset(names)


def _pred_conditional(inst: Inst, ctx: WriteContext) -> bool:
    return bool(ctx.operand_shapes) and ctx.operand_shapes[0].element_type == PT.PRED and len(inst.called_computation_ids) == 2


def _branch_conditional(inst: Inst, ctx: WriteContext) -> bool:
    return not _pred_conditional(inst, ctx)


_CONV = _ops("convolution")
_DOT = _ops("dot")
_GATHER = _ops("gather")
_SCATTER = _ops("scatter")
_COLLECTIVES = _ops("all-reduce", "all-reduce-start", "all-gather", "all-gather-start", "all-to-all",
                    "reduce-scatter", "collective-broadcast", "ragged-all-to-all")
_CHANNEL_OPS = _COLLECTIVES | _ops("collective-permute", "collective-permute-start", "send", "send-done",
                                   "recv", "recv-done")
_DIMENSION_OPS = _ops("broadcast", "transpose", "reduce", "reverse", "concatenate", "sort", "map", "scan",
                      "get-dimension-size", "set-dimension-size")
_COLLECTIVE_DIMENSION_OPS = _ops("all-gather", "all-gather-start", "all-to-all", "reduce-scatter", "ragged-all-to-all")
_TO_APPLY = _ops("reduce", "reduce-window", "map", "sort", "scatter", "call", "all-reduce",
                 "all-reduce-start", "reduce-scatter", "custom-call", "scan")
_CALLS = _ops("fusion", "async-start")
_FUSION_KINDS = {k: k for k in ("kLoop", "kInput", "kOutput", "kCustom")}
_API = {n: v for n, v in hlo_pb2.CustomCallApiVersion.items()}
_SCHEDULE = {n: v for n, v in hlo_pb2.CustomCallSchedule.items()}
_DIRECTIONS = {d: d for d in ("EQ", "NE", "GE", "GT", "LE", "LT")}
_DISTRIBUTION = {n.lower(): v for n, v in xla_data_pb2.RandomDistribution.items() if n != "RNG_INVALID"}
_RNG_ALGORITHM = {n.lower(): v for n, v in xla_data_pb2.RandomAlgorithm.items()}
_FFT = {n: v for n, v in xla_data_pb2.FftType.items()}
_TRANSPOSE = {n: v for n, v in xla_data_pb2.TriangularSolveOptions.Transpose.items()}

ATTRIBUTES: Tuple[AttrSpec, ...] = (
    # opcode-specific attributes, in XLA's printing order
    AttrSpec("index", "tuple_index", IntKind(omit=None), _ops("get-tuple-element"), required=True),
    AttrSpec("dimensions", "dimensions", IntListKind(always=True), _DIMENSION_OPS),
    AttrSpec("iota_dimension", "dimensions", FirstOfListKind(), _ops("iota"), required=True),
    AttrSpec("slice", "slice_dimensions", InstKind(V.read_slice, V.write_slice, lambda i: True), _ops("slice"), required=True),
    AttrSpec("dynamic_slice_sizes", "dynamic_slice_sizes", IntListKind(always=True), _ops("dynamic-slice"), required=True),
    AttrSpec("padding", "padding_config", MessageKind(V.read_padding, V.write_padding), _ops("pad"), required=True),
    AttrSpec("window", "window", MessageKind(V.read_window, V.write_window, lambda w: len(w.dimensions) > 0),
             _CONV | _ops("reduce-window", "select-and-scatter", "custom-call")),
    AttrSpec("dim_labels", "convolution_dimension_numbers", MessageKind(V.read_dim_labels, V.write_dim_labels),
             _CONV | _ops("custom-call")),
    AttrSpec("feature_group_count", "feature_group_count", GroupCountKind(), _CONV | _ops("custom-call")),
    AttrSpec("batch_group_count", "batch_group_count", GroupCountKind(), _CONV | _ops("custom-call")),
    AttrSpec("lhs_batch_dims", "dot_dimension_numbers.lhs_batch_dimensions", IntListKind(), _DOT | _ops("ragged-dot", "scaled-dot")),
    AttrSpec("lhs_contracting_dims", "dot_dimension_numbers.lhs_contracting_dimensions", IntListKind(always=True), _DOT | _ops("ragged-dot", "scaled-dot")),
    AttrSpec("rhs_batch_dims", "dot_dimension_numbers.rhs_batch_dimensions", IntListKind(), _DOT | _ops("ragged-dot", "scaled-dot")),
    AttrSpec("rhs_contracting_dims", "dot_dimension_numbers.rhs_contracting_dimensions", IntListKind(always=True), _DOT | _ops("ragged-dot", "scaled-dot")),
    AttrSpec("lhs_ragged_dims", "ragged_dot_dimension_numbers.lhs_ragged_dimensions", IntListKind(), _ops("ragged-dot")),
    AttrSpec("rhs_group_dims", "ragged_dot_dimension_numbers.rhs_group_dimensions", IntListKind(), _ops("ragged-dot")),
    AttrSpec("offset_dims", "gather_dimension_numbers.offset_dims", IntListKind(always=True), _GATHER),
    AttrSpec("collapsed_slice_dims", "gather_dimension_numbers.collapsed_slice_dims", IntListKind(always=True), _GATHER),
    AttrSpec("start_index_map", "gather_dimension_numbers.start_index_map", IntListKind(always=True), _GATHER),
    AttrSpec("operand_batching_dims", "gather_dimension_numbers.operand_batching_dims", IntListKind(), _GATHER),
    AttrSpec("start_indices_batching_dims", "gather_dimension_numbers.start_indices_batching_dims", IntListKind(), _GATHER),
    AttrSpec("index_vector_dim", "gather_dimension_numbers.index_vector_dim", IntKind(omit=None), _GATHER, required=True),
    AttrSpec("slice_sizes", "gather_slice_sizes", IntListKind(always=True), _GATHER, required=True),
    AttrSpec("update_window_dims", "scatter_dimension_numbers.update_window_dims", IntListKind(always=True), _SCATTER),
    AttrSpec("inserted_window_dims", "scatter_dimension_numbers.inserted_window_dims", IntListKind(always=True), _SCATTER),
    AttrSpec("scatter_dims_to_operand_dims", "scatter_dimension_numbers.scatter_dims_to_operand_dims", IntListKind(always=True), _SCATTER),
    AttrSpec("input_batching_dims", "scatter_dimension_numbers.input_batching_dims", IntListKind(), _SCATTER),
    AttrSpec("scatter_indices_batching_dims", "scatter_dimension_numbers.scatter_indices_batching_dims", IntListKind(), _SCATTER),
    AttrSpec("index_vector_dim", "scatter_dimension_numbers.index_vector_dim", IntKind(omit=None), _SCATTER, required=True),
    AttrSpec("indices_are_sorted", "indices_are_sorted", BoolKind(), _GATHER | _SCATTER),
    AttrSpec("unique_indices", "unique_indices", BoolKind(), _SCATTER),
    AttrSpec("direction", "comparison_direction", EnumKind(_DIRECTIONS), _ops("compare"), required=True),
    AttrSpec("type", "comparison_type", ComparisonTypeKind(), _ops("compare")),
    AttrSpec("is_stable", "is_stable", BoolKind(), _ops("sort")),
    AttrSpec("distribution", "distribution", EnumKind(_DISTRIBUTION), _ops("rng"), required=True),
    AttrSpec("algorithm", "rng_algorithm", EnumKind(_RNG_ALGORITHM), _ops("rng-bit-generator"), required=True),
    AttrSpec("fft_type", "fft_type", EnumKind(_FFT), _ops("fft"), required=True),
    AttrSpec("fft_length", "fft_length", IntListKind(always=True), _ops("fft"), required=True),
    AttrSpec("exponent_bits", "exponent_bits", IntKind(omit=None, lo=0, hi=(1 << 31) - 1), _ops("reduce-precision"), required=True),
    AttrSpec("mantissa_bits", "mantissa_bits", IntKind(omit=None, lo=0, hi=(1 << 31) - 1), _ops("reduce-precision"), required=True),
    AttrSpec("epsilon", "epsilon", FloatKind(), _ops("batch-norm-training", "batch-norm-inference", "batch-norm-grad"), required=True),
    AttrSpec("feature_index", "feature_index", IntKind(omit=None), _ops("batch-norm-training", "batch-norm-inference", "batch-norm-grad"), required=True),
    AttrSpec("left_side", "triangular_solve_options.left_side", BoolKind(), _ops("triangular-solve")),
    AttrSpec("lower", "triangular_solve_options.lower", BoolKind(), _ops("triangular-solve")),
    AttrSpec("unit_diagonal", "triangular_solve_options.unit_diagonal", BoolKind(), _ops("triangular-solve")),
    AttrSpec("transpose_a", "triangular_solve_options.transpose_a", EnumKind(_TRANSPOSE, omit=(0,)), _ops("triangular-solve")),
    AttrSpec("lower", "cholesky_options.lower", BoolKind(), _ops("cholesky")),
    AttrSpec("k", "k", IntKind(omit=None), _ops("topk"), required=True),
    AttrSpec("largest", "largest", BoolKind(), _ops("topk")),
    AttrSpec("delta", "delta", IntKind(omit=None), _ops("rng-get-and-update-state"), required=True),
    AttrSpec("kind", "fusion_kind", EnumKind(_FUSION_KINDS), _ops("fusion"), required=True),
    AttrSpec("channel_id", "channel_id", IntKind(), _CHANNEL_OPS),
    AttrSpec("replica_groups", "collective_device_list",
             InstKind(V.read_replica_groups, V.write_replica_groups, lambda i: True), _COLLECTIVES),
    AttrSpec("constrain_layout", "constrain_layout", BoolKind(), _COLLECTIVES),
    # XLA: all-gather and all-to-all print dimensions before use_global_device_ids,
    # reduce-scatter (an all-reduce underneath) after it
    AttrSpec("dimensions", "dimensions", IntListKind(), _COLLECTIVE_DIMENSION_OPS - _ops("reduce-scatter")),
    AttrSpec("use_global_device_ids", "use_global_device_ids", BoolKind(), _COLLECTIVES),
    AttrSpec("dimensions", "dimensions", IntListKind(), _ops("reduce-scatter")),
    AttrSpec("source_target_pairs", "source_target_pairs",
             InstKind(lambda c, i: [i.source_target_pairs.add(source=p[0], target=p[1]) if len(p) == 2 else _bad_pair(c)
                                    for p in c.nested_int_lists("as source_target_pairs")],
                      lambda i: "{" + ",".join(f"{{{p.source},{p.target}}}" for p in i.source_target_pairs) + "}",
                      lambda i: True),
             _ops("collective-permute", "collective-permute-start")),
    AttrSpec("is_host_transfer", "is_host_transfer", BoolKind(), _ops("send", "send-done", "recv", "recv-done")),
    AttrSpec("infeed_config", "infeed_config", BytesKind(), _ops("infeed")),
    AttrSpec("outfeed_shape", "outfeed_shape", MessageKind(lambda c, s: s.CopyFrom(parse_shape(c)), print_shape),
             _ops("outfeed")),
    AttrSpec("outfeed_config", "outfeed_config", BytesKind(), _ops("outfeed")),
    AttrSpec("cross_program_prefetch_index", "cross_program_prefetch_index", OptionalIntKind(), _ops("copy-start")),
    AttrSpec("parameter_replication", "parameter_replication.replicated_at_leaf_buffers", BoolListKind()),
    AttrSpec("custom_call_target", "custom_call_target", TextKind(always=True), _ops("custom-call"), required=True),
    AttrSpec("operand_layout_constraints", "operand_shapes_with_layout", OperandLayoutsKind(), _ops("custom-call")),
    AttrSpec("custom_call_has_side_effect", "custom_call_has_side_effect", BoolKind(), _ops("custom-call")),
    AttrSpec("output_to_operand_aliasing", "output_operand_aliasing",
             InstKind(V.read_output_operand_aliasing, V.write_output_operand_aliasing,
                      lambda i: len(i.output_operand_aliasing) > 0),
             _ops("custom-call", "fusion")),
    AttrSpec("schedule", "custom_call_schedule", EnumKind(_SCHEDULE, omit=(0,)), _ops("custom-call")),
    AttrSpec("api_version", "custom_call_api_version",
             EnumKind(_API, omit=(0, hlo_pb2.API_VERSION_ORIGINAL), default=hlo_pb2.API_VERSION_ORIGINAL),
             _ops("custom-call")),
    AttrSpec("operand_precision", "precision_config", PrecisionKind(), _DOT | _CONV | _ops("custom-call", "ragged-dot", "scaled-dot")),
    AttrSpec("algorithm", "precision_config.algorithm", DotAlgorithmKind(), _DOT | _CONV | _ops("ragged-dot", "scaled-dot")),
    AttrSpec("sparsity", "dot_sparsity", SkippedKind(), _DOT),
    AttrSpec("sparsity_config", "sparsity_config", PresentKind(), _CONV),
    AttrSpec("async_execution_thread", "async_execution_thread", TextKind(), _ops("async-start", "async-update", "async-done")),
    AttrSpec("is_composite", "is_composite", BoolKind(), _ops("call")),
    AttrSpec("domain", "domain_entry_sharding", DomainKind(), _ops("domain")),
    # called computations
    AttrSpec("calls", "called_computation_ids", ComputationKind(0), _CALLS, required=True),
    AttrSpec("calls", "called_computation_ids", ComputationKind(0), _ops("async-update", "async-done")),
    AttrSpec("to_apply", "called_computation_ids", ComputationKind(0), _TO_APPLY),
    AttrSpec("condition", "called_computation_ids", ComputationKind(1), _ops("while"), required=True),
    AttrSpec("body", "called_computation_ids", ComputationKind(0), _ops("while"), required=True),
    AttrSpec("select", "called_computation_ids", ComputationKind(0), _ops("select-and-scatter"), required=True),
    AttrSpec("scatter", "called_computation_ids", ComputationKind(1), _ops("select-and-scatter"), required=True),
    AttrSpec("true_computation", "called_computation_ids", ComputationKind(0, _pred_conditional), _ops("conditional")),
    AttrSpec("false_computation", "called_computation_ids", ComputationKind(1, _pred_conditional), _ops("conditional")),
    AttrSpec("branch_computations", "called_computation_ids", ComputationListKind(_branch_conditional), _ops("conditional")),
    AttrSpec("called_computations", "called_computation_ids",
             ComputationListKind(lambda i, c: len(i.called_computation_ids) > 1), _ops("custom-call")),
    # generic attributes
    AttrSpec("sharding", "sharding", MessageKind(V.read_sharding, V.write_sharding)),
    AttrSpec("frontend_attributes", "frontend_attributes",
             MessageKind(V.read_frontend_attributes, V.write_frontend_attributes, lambda m: len(m.map) > 0)),
    AttrSpec("control-predecessors", "control_predecessor_ids", ControlPredecessorsKind()),
    AttrSpec("statistics", "statistics_viz", MessageKind(V.read_statistics, V.write_statistics, lambda m: len(m.statistics) > 0)),
    AttrSpec("result_accuracy", "result_accuracy", ResultAccuracyKind(),
             _ops("exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "rsqrt", "sqrt", "cbrt",
                  "tanh", "tan", "sine", "cosine", "erf")),
    AttrSpec("origin", "original_value", MessageKind(V.read_original_value, V.write_original_value)),
    AttrSpec("metadata", "metadata", MessageKind(V.read_metadata, V.write_metadata, lambda m: m.ByteSize() > 0)),
    AttrSpec("backend_config", "backend_config", BytesKind(raw_braces=True)),
)


def _bad_pair(cur: Cursor) -> None:
    raise cur.fail("a source-target pair needs exactly two numbers")




_BY_OPCODE: Dict[str, Dict[str, AttrSpec]] = {}


def specs_for(opcode: str) -> Dict[str, AttrSpec]:
    """Attribute name -> spec for one opcode (cached)."""
    table = _BY_OPCODE.get(opcode)
    if table is None:
        table = {}
        for spec in ATTRIBUTES:
            if spec.opcodes is None or opcode in spec.opcodes:
                table.setdefault(spec.name, spec)
        _BY_OPCODE[opcode] = table
    return table


def apply_defaults(inst: Inst, given: FrozenSet[str], operand_shapes: Sequence[xla_data_pb2.ShapeProto]) -> Optional[str]:
    """Fill XLA's defaults for absent attributes; returns the name of a missing required one."""
    for name, spec in specs_for(inst.opcode).items():
        if name in given:
            continue
        if spec.required:
            return name
        spec.kind.default(inst, spec, operand_shapes)
    return None


def fill_defaults(inst: Inst, operand_shapes: Sequence[xla_data_pb2.ShapeProto]) -> None:
    """Fill every default XLA fills on load that is still unset (idempotent; for canonical forms)."""
    for spec in specs_for(inst.opcode).values():
        spec.kind.default(inst, spec, operand_shapes)


def write_attributes(inst: Inst, ctx: WriteContext) -> List[str]:
    """`name=value` texts of the instruction's attributes, in the table's order."""
    out: List[str] = []
    for spec in ATTRIBUTES:
        if spec.opcodes is not None and inst.opcode not in spec.opcodes:
            continue
        text = spec.kind.write(inst, spec, ctx)
        if text is not None:
            out.append(f"{spec.name}={text}")
    return out
