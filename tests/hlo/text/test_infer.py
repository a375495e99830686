"""Result shapes left out of the text (hlo/text/infer.py): what cannot be inferred is a parse
error naming the instruction and the reason. (That inferred shapes equal XLA's own is checked on
the `inferred_*` snippets by test_xla_oracle.py.)"""
from __future__ import annotations

import pytest

from hlo.errors import HloParseError
from hlo.text import parse_hlo_text
from hlo.text.infer import INFERRED


def _module(body: str, before: str = "") -> str:
    return f"HloModule m\n{before}ENTRY e {{\n  p = f32[2,3] parameter(0)\n  q = f32[3,2] parameter(1)\n{body}\n}}"


@pytest.mark.parametrize("body, message", [
    ("  ROOT c = constant(1)", "result shape of constant is not inferred here"),
    ("  ROOT r = select-and-scatter(p, p, p), window={size=1x1}, select=e, scatter=e",
     "result shape of select-and-scatter is not inferred"),
    ("  ROOT r = add(p, q)", r"cannot infer the result shape of 'r': add operands have different dimensions"),
    ("  ROOT r = transpose(p), dimensions={0,0}", "not a permutation"),
    ("  ROOT r = dot(p, p), lhs_contracting_dims={1}, rhs_contracting_dims={0}", "do not fit"),
    ("  ROOT r = concatenate(p, q), dimensions={0}", "differ outside the concatenated dimension"),
    ("  t = (f32[2,3]) tuple(p)\n  ROOT r = get-tuple-element(t), index=3", "index 3 is not an element"),
    ("  ROOT r = convolution(p, q), window={size=3}, dim_labels=bf_io->bf", "window and dimension numbers"),
    ("  ROOT r = convolution(p, q), dim_labels=bf_io->bf, feature_group_count=2", "kernel's times feature_group_count"),
])
def test_what_cannot_be_inferred_is_an_error_naming_the_instruction(body: str, message: str) -> None:
    with pytest.raises(HloParseError, match=message):
        parse_hlo_text(_module(body))


@pytest.mark.parametrize("body, message", [
    # XLA's parser infers a reduce-window of one input only
    ("  s = f32[] constant(0)\n  ROOT r = reduce-window(p, p, s, s), window={size=1x1}, to_apply=f",
     "reduce-window of several inputs"),
    ("  s = f32[] constant(0)\n  ROOT r = reduce-window(p, s), window={size=1}, to_apply=f",
     "window has 1 dimensions, its input 2"),
])
def test_reduce_window_shapes_that_are_not_inferred(body: str, message: str) -> None:
    before = "f {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n"
    with pytest.raises(HloParseError, match=message):
        parse_hlo_text(_module(body, before))


def test_a_callee_defined_after_its_caller_is_refused_as_xla_does() -> None:
    text = ("HloModule m\nENTRY e {\n  s = f32[] parameter(0)\n  ROOT c = call(s), to_apply=f\n}\n"
            "f {\n  a = f32[] parameter(0)\n  ROOT n = f32[] negate(a)\n}")
    with pytest.raises(HloParseError, match="must be defined before 'c'"):
        parse_hlo_text(text)


def test_inferred_shapes_feed_later_inferences_and_the_signature() -> None:
    m = parse_hlo_text(_module("  a = add(p, p)\n  t = transpose(a), dimensions={1,0}\n  ROOT d = dot(t, p), "
                               "lhs_contracting_dims={1}, rhs_contracting_dims={0}"))
    assert list(m.host_program_shape.result.dimensions) == [3, 3]
    assert "add" in INFERRED and "parameter" not in INFERRED
