"""XLA's opcode table (hlo.opcodes): the parser knows exactly its opcodes, async shorthands
derive from it, and the compiler's verifier takes operand counts from it."""
from __future__ import annotations

import pytest

import hlo
from hlo.opcodes import CLASSES, OPCODES, async_shorthand, can_wrap


def test_table_has_xlas_opcodes_with_arity_and_class():
    assert len(OPCODES) == 133  # jaxlib 0.10.2's XLA
    assert OPCODES["exponential"].arity == 1 and OPCODES["select"].arity == 3
    assert OPCODES["ragged-all-to-all"].arity == 6 and OPCODES["batch-norm-grad"].arity == 5
    assert OPCODES["tuple"].variadic and OPCODES["convolution"].variadic and not OPCODES["dot"].variadic
    assert {o.cls for o in OPCODES.values()} == set(CLASSES)
    assert all(o.name == name for name, o in OPCODES.items())


@pytest.mark.parametrize("name", ["atan", "shuffle", "collective-reduce", "exp", "get_tuple_element"])
def test_opcodes_outside_the_table_do_not_parse(name):
    text = f"HloModule m\nENTRY e {{\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] {name}(p)\n}}"
    with pytest.raises(hlo.HloParseError, match=f"unknown opcode '{name}'"):
        hlo.load(text)


def test_async_shorthand_and_wrapping():
    assert async_shorthand("negate-start") == ("negate", "start")
    assert async_shorthand("all-reduce-start") == (None, None)  # an opcode of its own
    assert async_shorthand("parameter-start") == (None, None) and async_shorthand("frob-done") == (None, None)
    assert can_wrap("negate") and not can_wrap("constant") and not can_wrap("copy") and not can_wrap("frob")


def test_every_elementwise_opcode_reads_back_from_text():
    for o in OPCODES.values():
        if o.cls != "elementwise" or o.arity is None:
            continue
        args = ", ".join(["p"] * o.arity)
        text = f"HloModule m\nENTRY e {{\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] {o.name}({args})\n}}"
        if o.name == "compare":
            text = text.replace("f32[2] compare(p, p)", "pred[2] compare(p, p), direction=LT")
        if o.name == "reduce-precision":
            text = text.replace("(p)\n", "(p), exponent_bits=5, mantissa_bits=10\n")
        module = hlo.load(text)
        assert module.entry.root.opcode == o.name
        assert hlo.load(module.to_text()).entry.root.opcode == o.name
