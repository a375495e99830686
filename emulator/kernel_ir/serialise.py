"""Kernel IR <-> bytes, without pickle.

Format (documented in docs/kernel-ir.md)::

    b"NKIR"  magic, 4 bytes
    u16      major version (little endian)
    u16      minor version
    u32      length N of the document
    N bytes  UTF-8 JSON document (see ``to_document``)
    rest     constant data: each constant's raw C-order bytes, at the offset the document gives

A reader accepts its own major version and any minor version; unknown keys are ignored so that
minor versions can add fields. Nothing is eval'd: the document is plain JSON and every op name is
checked against ``emulator.kernel_ir.ops`` on the way in.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from .instructions import SPECS
from .validate import KernelIRValidationError, validate
from .ir import (IR_VERSION, LOOP_KINDS, ROLES, Access, Const, Instruction, KernelIR, Loop,
                 SourceLoc, Statement, TensorDecl, affine_from_json, affine_to_json)

MAGIC = b"NKIR"
_HEADER = struct.Struct("<4sHHI")


class KernelIRFormatError(ValueError):
    """Bytes that are not a kernel IR this reader understands."""


def to_bytes(kernel: KernelIR) -> bytes:
    document = to_document(kernel)
    blob = bytearray()
    table = []
    for name in sorted(kernel.constants):
        data = kernel.constants[name]
        table.append({"name": name, "offset": len(blob), "nbytes": len(data)})
        blob += data
    document["constants"] = table
    doc = json.dumps(document, separators=(",", ":"), sort_keys=True).encode()
    return _HEADER.pack(MAGIC, kernel.version[0], kernel.version[1], len(doc)) + doc + bytes(blob)


def from_bytes(data: bytes) -> KernelIR:
    if len(data) < _HEADER.size:
        raise KernelIRFormatError("kernel IR too short for its header")
    magic, major, minor, n = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise KernelIRFormatError(f"bad kernel IR magic {magic!r}, expected {MAGIC!r}")
    if major != IR_VERSION[0]:
        raise KernelIRFormatError(
            f"kernel IR version {major}.{minor} is not readable by this emulator "
            f"(reads major version {IR_VERSION[0]})")
    body = data[_HEADER.size:_HEADER.size + n]
    if len(body) != n:
        raise KernelIRFormatError(f"kernel IR truncated: document is {len(body)} of {n} bytes")
    try:
        doc = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise KernelIRFormatError(f"kernel IR document is not JSON: {e}") from e
    kernel = from_document(doc)
    kernel.version = (major, minor)
    blob = data[_HEADER.size + n:]
    for entry in doc.get("constants", []):
        off, size = int(entry["offset"]), int(entry["nbytes"])
        if off < 0 or off + size > len(blob):
            raise KernelIRFormatError(f"constant {entry['name']!r} lies outside the data section")
        kernel.constants[str(entry["name"])] = bytes(blob[off:off + size])
    try:
        validate(kernel)
    except KernelIRValidationError as e:
        raise KernelIRFormatError(f"invalid kernel IR: {e}") from e
    return kernel


# --- document <-> dataclasses ------------------------------------------------------------------

def to_document(k: KernelIR) -> dict[str, Any]:
    return {
        "name": k.name,
        "grid": list(k.grid),
        "source": k.source,
        "inputs": list(k.inputs),
        "outputs": list(k.outputs),
        "tensors": [_tensor_doc(t) for t in k.tensors.values()],
        "body": [_stmt_doc(s) for s in k.body],
        **({"lnc": list(k.lnc)} if k.lnc else {}),
    }


def from_document(doc: dict[str, Any]) -> KernelIR:
    try:
        tensors = [_tensor_from(t) for t in doc["tensors"]]
        return KernelIR(
            name=str(doc["name"]),
            grid=tuple(int(g) for g in doc["grid"]),
            tensors={t.name: t for t in tensors},
            inputs=tuple(doc["inputs"]),
            outputs=tuple(doc["outputs"]),
            body=[_stmt_from(s) for s in doc["body"]],
            source=str(doc.get("source", "")),
            lnc=tuple(int(v) for v in doc["lnc"]) if doc.get("lnc") else None,
        )
    except (KeyError, TypeError, ValueError) as e:
        raise KernelIRFormatError(f"malformed kernel IR document: {e!r}") from e


def _loc_doc(loc: SourceLoc | None) -> list | None:
    return None if loc is None else [loc.file, loc.line]


def _loc_from(d: list | None) -> SourceLoc | None:
    return None if d is None else SourceLoc(str(d[0]), int(d[1]))


_affine_doc = affine_to_json
_affine_from = affine_from_json


def _access_doc(a: Access) -> dict:
    return {"tensor": a.tensor, "shape": list(a.shape), "index": [_affine_doc(x) for x in a.index]}


def _access_from(d: dict) -> Access:
    return Access(str(d["tensor"]), tuple(int(s) for s in d["shape"]),
                  tuple(_affine_from(x) for x in d["index"]))


def _operand_doc(o: Access | Const) -> dict:
    if isinstance(o, Const):
        return {"const": o.value}
    return {"access": _access_doc(o)}


def _operand_from(d: dict) -> Access | Const:
    if "const" in d:
        v = d["const"]
        if not isinstance(v, (int, float, bool)):
            raise KernelIRFormatError(f"constant operand {v!r} is not a number")
        return Const(v)
    return _access_from(d["access"])


def _tensor_doc(t: TensorDecl) -> dict:
    return {"name": t.name, "shape": list(t.shape), "dtype": t.dtype, "memory": t.memory,
            "role": t.role, "init": t.init, "loc": _loc_doc(t.loc)}


def _tensor_from(d: dict) -> TensorDecl:
    if d["role"] not in ROLES:
        raise KernelIRFormatError(f"unknown tensor role {d['role']!r}")
    return TensorDecl(str(d["name"]), tuple(int(s) for s in d["shape"]), str(d["dtype"]),
                      str(d["memory"]), d["role"], str(d["init"]), _loc_from(d.get("loc")))


def _stmt_doc(s: Statement) -> dict:
    if isinstance(s, Loop):
        doc = {"var": s.var, "extent": s.extent, "kind": s.kind, "loc": _loc_doc(s.loc),
               "body": [_stmt_doc(b) for b in s.body]}
        if s.operands or s.step != 1:  # data-dependent loops (control.py)
            doc["operands"] = [_operand_doc(o) for o in s.operands]
            doc["step"] = s.step
        return {"loop": doc}
    return {"op": s.op,
            "dst": None if s.dst is None else _access_doc(s.dst),
            "srcs": [_operand_doc(o) for o in s.srcs],
            "attrs": s.attrs,
            "mask": [_affine_doc(m) for m in s.mask],
            "acc": s.acc,
            "loc": _loc_doc(s.loc)}


def _stmt_from(d: dict) -> Statement:
    if "loop" in d:
        lp = d["loop"]
        if lp["kind"] not in LOOP_KINDS:
            raise KernelIRFormatError(f"unknown loop kind {lp['kind']!r}")
        return Loop(str(lp["var"]), int(lp["extent"]), lp["kind"],
                    [_stmt_from(b) for b in lp["body"]], _loc_from(lp.get("loc")),
                    tuple(_operand_from(o) for o in lp.get("operands", [])),
                    int(lp.get("step", 1)))
    if d["op"] not in SPECS:
        raise KernelIRFormatError(f"unknown instruction {d['op']!r}")
    attrs = d.get("attrs") or {}
    if not isinstance(attrs, dict):
        raise KernelIRFormatError("instruction attrs must be an object")
    return Instruction(
        op=d["op"],
        dst=None if d.get("dst") is None else _access_from(d["dst"]),
        srcs=tuple(_operand_from(o) for o in d.get("srcs", [])),
        attrs=attrs,
        mask=tuple(_affine_from(m) for m in d.get("mask", [])),
        acc=d.get("acc"),
        loc=_loc_from(d.get("loc")),
    )
