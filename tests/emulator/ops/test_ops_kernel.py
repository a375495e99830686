"""The kernel instruction's handler (emulator/ops/kernel.py): a payload is prepared once per
loaded program and shared by its instructions; a runner with counters leaves its probe in the
handler context for the profiler; a bad payload index or kind is an ArtifactError."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

import emulator.ops  # noqa: F401 - registers the handlers
from emulator.artifact import ArtifactError
from emulator.ops import kernel
from emulator.program.context import HandlerContext
from emulator.program.ops import OPS

F = ["f32", [4]]


class _Runner:
    """A payload runner that counts its runs and reports counters after the first."""

    def __init__(self) -> None:
        self.runs = 0

    def __call__(self, x):
        self.runs += 1
        return [x + 1]

    def counters(self):
        return ({"arith_elements": 16}, 1) if self.runs else None


def _program(kind: str = "fake") -> SimpleNamespace:
    return SimpleNamespace(kernels=[SimpleNamespace(kind=kind, name="k0", data=b"")], shared={})


def _ctx(program: SimpleNamespace, index: int = 0) -> HandlerContext:
    return HandlerContext("kernel", "k", {"payload": index}, F, [F], program)


def test_a_payload_is_prepared_once_per_program_and_leaves_its_counters_probe(monkeypatch):
    loads = []
    monkeypatch.setitem(kernel.PAYLOADS, "fake", lambda name, data, kernels: loads.append(name) or _Runner())
    program = _program()
    a, b = _ctx(program), _ctx(program)
    fa, fb = OPS["kernel"].handler(a), OPS["kernel"].handler(b)
    assert loads == ["k0"]  # shared by both instructions of the program
    assert a.counters() is None  # before the first run
    assert fa(1.0) == 2.0 and fb(2.0) == 3.0
    assert a.counters() == ({"arith_elements": 16}, 1) and b.counters == a.counters
    OPS["kernel"].handler(_ctx(_program()))
    assert loads == ["k0", "k0"]  # another loaded program prepares its own


def test_a_payload_without_counters_leaves_no_probe(monkeypatch):
    monkeypatch.setitem(kernel.PAYLOADS, "fake", lambda name, data, kernels: (lambda x: [x]))
    ctx = _ctx(_program())
    OPS["kernel"].handler(ctx)
    assert ctx.counters is None


def test_bad_payload_index_or_kind_is_an_artifact_error():
    with pytest.raises(ArtifactError, match="kernel payload 3 does not exist"):
        OPS["kernel"].handler(_ctx(_program(), 3))
    with pytest.raises(ArtifactError, match="has kind 'nonesuch'"):
        OPS["kernel"].handler(_ctx(_program("nonesuch")))
