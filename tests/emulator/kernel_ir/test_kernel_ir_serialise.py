"""Kernel IR bytes: round trip, version and format checks, no pickle."""

from __future__ import annotations

import json
import struct

import pytest

from emulator.kernel_ir import (IR_VERSION, Access, Affine, Const, Instruction, KernelIR,
                                KernelIRFormatError, Loop, SourceLoc, TensorDecl, from_bytes,
                                to_bytes)


def sample() -> KernelIR:
    idx = (Affine.make(0, {"p0": 128, "t0": 1}), Affine.make(-1, {"l1": 512, "t1": 1}))
    a = Access("x", (128, 512), idx)
    t = Access("t", (128, 512), (Affine.make(0, {"t0": 1}), Affine.make(0, {"t1": 1})))
    body = [Loop("l1", 2, "affine", [
        Instruction("load", t, (a,), {}, (Affine.make(10, {"t0": -1}),), None, SourceLoc("k.py", 3)),
        Instruction("tensor_scalar", t, (t, Const(float("-inf"))), {"op0": "maximum"},
                    loc=SourceLoc("k.py", 4)),
        Instruction("store", a, (t,), acc="add")], SourceLoc("k.py", 2))]
    tensors = {"x": TensorDecl("x", (256, 1024), "bfloat16", "hbm", "input"),
               "t": TensorDecl("t", (128, 512), "float32", "sbuf", init="defined")}
    return KernelIR("k", (2,), tensors, ("x",), ("x",), body, "k.py")


def test_round_trip_is_identical():
    k = sample()
    data = to_bytes(k)
    assert data[:4] == b"NKIR"
    k2 = from_bytes(data)
    assert k2 == k
    assert to_bytes(k2) == data


def test_header_carries_the_version_and_rejects_other_majors():
    data = bytearray(to_bytes(sample()))
    assert struct.unpack_from("<HH", data, 4) == IR_VERSION
    struct.pack_into("<H", data, 4, IR_VERSION[0] + 1)
    with pytest.raises(KernelIRFormatError, match="version"):
        from_bytes(bytes(data))


def test_rejects_bad_magic_truncation_and_unknown_ops():
    data = to_bytes(sample())
    with pytest.raises(KernelIRFormatError, match="magic"):
        from_bytes(b"XXXX" + data[4:])
    with pytest.raises(KernelIRFormatError, match="truncated"):
        from_bytes(data[:-5])
    doc = json.loads(data[12:])
    doc["body"][0]["loop"]["body"][0]["op"] = "os.system"
    body = json.dumps(doc).encode()
    with pytest.raises(KernelIRFormatError, match="unknown instruction"):
        from_bytes(data[:8] + struct.pack("<I", len(body)) + body)


def test_printer_shows_loops_accesses_masks_and_lines():
    from emulator.kernel_ir import format_kernel

    text = format_kernel(sample())
    assert "kernel k grid=[2]" in text
    assert "x: hbm bfloat16[256, 1024] input" in text
    assert "for l1 in affine_range(2):" in text and "# k.py:2" in text
    assert "t[t0, t1] = load x[128*p0 + t0, 512*l1 + t1 - 1]  mask(-t0 + 10 >= 0)" in text
    assert "x[128*p0 + t0, 512*l1 + t1 - 1] add= store t[t0, t1]" in text


def test_structurally_invalid_ir_is_refused_on_read():
    def reencode(mutate):
        data = to_bytes(sample())
        doc = json.loads(data[12:])
        mutate(doc)
        body = json.dumps(doc).encode()
        return data[:8] + struct.pack("<I", len(body)) + body

    def loop_body(doc):
        return doc["body"][0]["loop"]["body"]

    cases = [
        (lambda d: loop_body(d)[0]["srcs"][0]["access"].update(tensor="nope"), "unknown tensor"),
        (lambda d: loop_body(d)[0]["srcs"][0]["access"]["index"].pop(), "1 indices for tensor"),
        (lambda d: d["tensors"][0].update(dtype="float64"), "unknown dtype"),
        (lambda d: loop_body(d)[1]["attrs"].update(op0="system"), "attribute 'op0' must be an ALU operator"),
        (lambda d: d["body"].append(loop_body(d)[0]), "symbol 'l1' is out of scope"),
    ]
    for mutate, message in cases:
        with pytest.raises(KernelIRFormatError, match=message):
            from_bytes(reencode(mutate))
