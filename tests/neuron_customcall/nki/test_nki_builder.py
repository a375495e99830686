"""The builder is the only emitter of kernel IR, and what it emits matches the instruction specs
(a front-end mistake is a trace error naming the instruction, not a wrong answer later)."""
from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest

from neuron_customcall import nki
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import KernelTraceError
from neuron_customcall.nki.tile import Tile
from neuron_customcall.nki.tracer import current

NKI = pathlib.Path(nki.__file__).parent
IR_STATEMENTS = {"Instruction", "Loop", "TensorDecl", "KernelIR"}


def test_only_the_builder_creates_ir_statements():
    makers = {}
    for path in NKI.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in IR_STATEMENTS:
                makers.setdefault(path.relative_to(NKI).as_posix(), set()).add(node.func.id)
    assert makers == {"builder.py": IR_STATEMENTS}


def _traced(body):
    @nki.jit
    def kernel(a):
        body(nl.load(a))
        return a
    return kernel


@pytest.mark.parametrize("body, message", [
    (lambda t: current().emit("tensor_tensor", t, t), "tensor_tensor: takes 2 sources"),
    (lambda t: current().emit("tensor_tensor", t, t, t, op="plus"),
     "attribute 'op' must be an ALU operator"),
    (lambda t: current().emit("memset", t, t), "source 'value' must be a constant"),
    (lambda t: current().emit("tensor_frobnicate", t, t), "unknown kernel-IR instruction"),
    (lambda t: current().emit("tensor_tensor", t, t, "x", op="add"), "str is not a tile"),
])
def test_an_instruction_that_does_not_match_its_spec_is_a_trace_error(body, message):
    with pytest.raises(KernelTraceError, match="invalid"):
        try:
            _traced(body)(np.zeros((4, 8), np.float32))
        except KernelTraceError as e:
            assert message in str(e)
            raise


def test_tile_operators_are_the_language_functions():
    assert Tile.__add__.__module__ == nl.__name__
    a = np.arange(32, dtype=np.float32).reshape(4, 8)

    @nki.jit
    def ops(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        acc = nl.zeros(x.shape, nl.float32)
        acc += (2 - t) * t / 4 + abs(-t)
        acc[...] = acc.astype(nl.float32) - (t >= 3)
        nl.store(out, acc)
        return out

    expected = (2 - a) * a / 4 + np.abs(a) - (a >= 3)
    np.testing.assert_allclose(ops(a), expected, rtol=1e-6)
