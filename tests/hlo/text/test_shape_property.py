"""Random shapes (element types, static and bounded-dynamic dimensions, tuples, layouts with tiles
and memory spaces) read by us exactly as XLA's parser reads them, and printed back readable by both.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hlo.text.test_xla_oracle import check_text

TYPES = ["f32", "bf16", "s8", "u32", "pred", "c64", "f8e4m3fn", "s4", "f64", "u16", "f16", "s64"]


@st.composite
def array_shapes(draw) -> str:
    element = draw(st.sampled_from(TYPES))
    rank = draw(st.integers(0, 3))
    dims = [draw(st.one_of(st.integers(0, 8).map(str), st.integers(1, 8).map(lambda n: f"<={n}")))
            for _ in range(rank)]
    text = f"{element}[{','.join(dims)}]"
    if not draw(st.booleans()):
        return text
    perm = draw(st.permutations(list(range(rank))))
    attrs = ""
    if rank and draw(st.booleans()):
        tile = draw(st.lists(st.sampled_from([1, 2, 4, 8, 128]), min_size=1, max_size=rank))
        attrs += "T(" + ",".join(map(str, tile)) + ")"
    if draw(st.booleans()):
        attrs += f"S({draw(st.integers(0, 2))})"
    if not rank and not attrs:
        return text  # XLA reads no `{}` after a scalar
    return text + "{" + ",".join(map(str, perm)) + (":" + attrs if attrs else "") + "}"


shapes = st.recursive(array_shapes(), lambda inner: st.lists(inner, max_size=3).map(lambda xs: "(" + ", ".join(xs) + ")"),
                      max_leaves=5)


@settings(max_examples=80, deadline=3000, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(shapes)
def test_parameter_shapes_read_as_xla_reads_them(shape):
    check_text(f"HloModule m\nENTRY e {{\n  ROOT p = {shape} parameter(0)\n}}")


@pytest.mark.parametrize("shape", ["f32[]{:S(1)}", "f32[2,3]{1,0:T(2)}", "(f32[]{:S(1)}, s32[<=3]{0})",
                                   "s4[8,3]{1,0:E(4)S(1)}", "f32[8,128]{1,0:T(8,128)(2,1)}"])
def test_layout_attributes(shape):
    check_text(f"HloModule m\nENTRY e {{\n  ROOT p = {shape} parameter(0)\n}}")
