"""Value kinds of the attribute table: how one kind of attribute value is read from HLO text into
its proto field, written back, and defaulted when absent.

The kinds know nothing about which attribute or opcode they serve; the table in attributes.py
pairs each attribute name with a proto field path and one of these.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
from google.protobuf.message import Message

from hlo.schema import hlo_pb2, xla_data_pb2
from hlo.text import values as V
from hlo.text.cursor import Cursor
from hlo.text.lexer import STRING, WORD, Token
from hlo.text.literals import format_float
from hlo.text.types import COMPLEX_TYPES, FLOAT_TYPES, SIGNED_TYPES

__all__ = [
    "BoolKind", "BoolListKind", "BytesKind", "ComparisonTypeKind", "ComputationKind", "ComputationListKind",
    "ControlPredecessorsKind", "DomainKind", "DotAlgorithmKind", "EnumKind", "FirstOfListKind", "FloatKind",
    "GroupCountKind", "InstKind", "IntKind", "IntListKind", "Kind", "MessageKind", "OperandLayoutsKind",
    "OptionalIntKind", "PrecisionKind", "PresentKind", "ReadContext", "ResultAccuracyKind", "SkippedKind",
    "TextKind", "WriteContext",
]

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
    #: reads a computation written inline (`to_apply={ ... }`) and returns the name it is given;
    #: None where the text allows no such computation
    read_inline: Optional[Callable[[], str]] = None

    def computation_name(self, context: str) -> str:
        """A called computation: its name, or (as XLA's parser allows wherever an attribute takes a
        computation) its instructions written inline in braces."""
        if self.read_inline is not None and self.cur.at_punct("{"):
            return self.read_inline()
        return self.cur.expect_name(context)


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

    def text_default(self, inst: Inst, spec: "AttrSpec") -> None:
        """Fill what XLA's *parser* assumes when the attribute is not written (a binary proto's
        unset field keeps its proto default: only text reading calls this)."""


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
    """`absent`: the value XLA's parser assumes when the attribute is not written. An attribute
    whose absent value is true (topk's `largest`) is always printed, as XLA prints it."""

    def __init__(self, absent: bool = False) -> None:
        self.absent = absent

    def read(self, ctx, spec):
        parent, name = _parent(ctx.inst, spec.field)
        setattr(parent, name, ctx.cur.expect_bool(f"as value of {spec.name}"))

    def write(self, inst, spec, ctx):
        value = bool(_get(inst, spec.field))
        if not value and not self.absent:
            return None
        return "true" if value else "false"

    def text_default(self, inst, spec):
        if self.absent:
            parent, name = _parent(inst, spec.field)
            setattr(parent, name, True)


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
        name = ctx.computation_name(f"as value of {spec.name}")
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
        names = cur.delimited(lambda: ctx.computation_name(f"in {spec.name}"), spec.name, limit=1 << 16)
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


