"""The program: computations of slot-addressed instructions, and its JSON form.

Why slots: a computation is a straight line of instructions, each reading operand slots and
writing one result slot; the compiler's buffer assignment chooses slots (reusing dead ones) and
lists, per instruction, the slots whose last use it is, so the executor frees them at once. Control
flow (while, conditional, call, and the scalar computations of reduce/sort/scatter) refers to other
computations of the same program by index: sub-programs, not jumps.

A value type is `["f32", [4, 8]]` for an array, `["tuple", [type, ...]]` for a tuple and
`["token", []]` for a token.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from emulator.program.dtypes import DTYPES, TOKEN, TUPLE
from emulator.program.ops import OPS, check_attr

ValueType = list  # ["f32", [dims]] | ["tuple", [ValueType, ...]] | ["token", []]


class ProgramError(ValueError):
    """A program that does not follow the instruction set (bad op, slot, attribute or type)."""


@dataclass
class Instruction:
    op: str
    out: int
    ins: list[int]
    type: ValueType
    attrs: dict[str, Any] = field(default_factory=dict)
    free: list[int] = field(default_factory=list)
    name: str = ""
    reuse: int = -1  # operand position whose (dead, owned) buffer the result may overwrite
    #: "file:line" of the user's code the instruction came from (HLO metadata), for profiles.
    source: str = ""

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"op": self.op, "out": self.out, "in": self.ins, "type": self.type}
        if self.attrs:
            d["attrs"] = self.attrs
        if self.free:
            d["free"] = self.free
        if self.reuse >= 0:
            d["reuse"] = self.reuse
        if self.name:
            d["name"] = self.name
        if self.source:
            d["src"] = self.source
        return d


@dataclass
class Computation:
    name: str
    num_slots: int
    params: list[int]
    param_types: list[ValueType]
    instructions: list[Instruction]
    result: int
    result_type: ValueType

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "num_slots": self.num_slots, "params": self.params,
            "param_types": self.param_types, "result": self.result, "result_type": self.result_type,
            "instructions": [i.to_json() for i in self.instructions],
        }


@dataclass
class Program:
    computations: list[Computation]
    entry: int

    def to_json_bytes(self) -> bytes:
        """Canonical JSON (sorted keys, no spaces): equal programs give equal bytes."""
        doc = {"entry": self.entry, "computations": [c.to_json() for c in self.computations]}
        return json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()

    @classmethod
    def from_json_bytes(cls, data: bytes) -> Program:
        """Parse and validate; any defect is a ProgramError naming where it is."""
        try:
            doc = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
            raise ProgramError(f"program is not valid JSON: {e}") from None
        return _parse_program(doc)


# -- validation -------------------------------------------------------------------------------
def _need(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise ProgramError(f"{where}: {what}")


def check_type(t: Any, where: str) -> None:
    """Validate a value type (recursively for tuples)."""
    _need(type(t) is list and len(t) == 2 and type(t[0]) is str and type(t[1]) is list, where,
          f"bad value type {t!r}")
    if t[0] == TUPLE:
        for s in t[1]:
            check_type(s, where)
    elif t[0] == TOKEN:
        _need(t[1] == [], where, "a token has no dimensions")
    else:
        _need(t[0] in DTYPES, where, f"unknown element type {t[0]!r}")
        _need(all(type(d) is int and 0 <= d < 2**40 for d in t[1]), where, f"bad dimensions {t[1]!r}")


def _slot(v: Any, n: int, where: str) -> int:
    _need(type(v) is int and 0 <= v < n, where, f"slot {v!r} out of range 0..{n - 1}")
    return v


def _parse_program(doc: Any) -> Program:
    _need(isinstance(doc, dict) and set(doc) == {"entry", "computations"}, "program", "bad top-level keys")
    comps_doc = doc["computations"]
    _need(type(comps_doc) is list and comps_doc, "program", "no computations")
    n_comps = len(comps_doc)
    comps = [_parse_computation(c, k, n_comps) for k, c in enumerate(comps_doc)]
    entry = doc["entry"]
    _need(type(entry) is int and 0 <= entry < n_comps, "program", f"bad entry {entry!r}")
    return Program(comps, entry)


_COMP_KEYS = {"name", "num_slots", "params", "param_types", "result", "result_type", "instructions"}


def _parse_computation(d: Any, k: int, n_comps: int) -> Computation:
    where = f"computation {k}"
    _need(isinstance(d, dict) and set(d) == _COMP_KEYS, where, "bad keys")
    n = d["num_slots"]
    _need(type(n) is int and 0 < n < 2**24, where, "bad num_slots")
    _need(type(d["name"]) is str, where, "bad name")
    _need(type(d["params"]) is list and type(d["param_types"]) is list
          and len(d["params"]) == len(d["param_types"]), where, "bad params")
    params = [_slot(p, n, where) for p in d["params"]]
    for t in d["param_types"]:
        check_type(t, where)
    check_type(d["result_type"], where)
    _need(type(d["instructions"]) is list, where, "bad instructions")
    insts = [_parse_instruction(i, n, n_comps, f"{where} instruction {j}") for j, i in enumerate(d["instructions"])]
    return Computation(d["name"], n, params, d["param_types"], insts, _slot(d["result"], n, where), d["result_type"])


def _parse_instruction(d: Any, n: int, n_comps: int, where: str) -> Instruction:
    _need(isinstance(d, dict) and {"op", "out", "in", "type"} <= set(d)
          <= {"op", "out", "in", "type", "attrs", "free", "name", "reuse", "src"}, where, "bad keys")
    op = d["op"]
    _need(type(op) is str and op in OPS, where, f"unknown op {op!r}")
    spec = OPS[op]
    ins = d["in"]
    _need(type(ins) is list, where, "bad operand list")
    ins = [_slot(i, n, where) for i in ins]
    _need(spec.arity is None or len(ins) == spec.arity, where, f"{op} takes {spec.arity} operands, not {len(ins)}")
    check_type(d["type"], where)
    attrs = d.get("attrs", {})
    _need(isinstance(attrs, dict) and set(attrs) == set(spec.attrs), where,
          f"{op} attributes must be {sorted(spec.attrs)}, not {sorted(attrs) if isinstance(attrs, dict) else attrs!r}")
    for key, kind in spec.attrs.items():
        _need(check_attr(kind, attrs[key]), where, f"attribute {key} of {op} is not of kind {kind}")
        if kind == "comp":
            _need(0 <= attrs[key] < n_comps, where, f"attribute {key}: no computation {attrs[key]}")
        if kind == "comps":
            _need(all(0 <= c < n_comps for c in attrs[key]), where, f"attribute {key}: bad computation index")
    free = d.get("free", [])
    _need(type(free) is list, where, "bad free list")
    name = d.get("name", "")
    _need(type(name) is str, where, "bad name")
    source = d.get("src", "")
    _need(type(source) is str and len(source) <= 4096, where, "bad source location")
    reuse = d.get("reuse", -1)
    _need(type(reuse) is int and -1 <= reuse < len(ins) and (reuse < 0 or ins[reuse] in free), where,
          f"reuse {reuse!r} must name an operand freed by this instruction")
    return Instruction(op, _slot(d["out"], n, where), ins, d["type"], attrs, [_slot(f, n, where) for f in free], name,
                       reuse, source)
