"""The printer: XLA's layout of the text, and our own round trip on every snippet."""
from __future__ import annotations

import pytest

from hlo.schema import hlo_pb2
from hlo.text import parse_hlo_text, print_hlo_text
from hlo.canonical import canonical_module
from tests.hlo.text.snippets import SNIPPETS

SIMPLE = """HloModule m
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %c = f32[] add(%a, %b)
}
ENTRY %e {
  %p = f32[2,3] parameter(0)
  %z = f32[] constant(0)
  ROOT %r = f32[3] reduce(%p, %z), dimensions={0}, to_apply=%add, metadata={op_name="sum"}
}"""


def test_xla_layout_of_the_text():
    text = print_hlo_text(parse_hlo_text(SIMPLE))
    assert text == """HloModule m, entry_computation_layout={(f32[2,3]{1,0})->f32[3]{0}}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %c = f32[] add(f32[] %a, f32[] %b)
}

ENTRY %e (p: f32[2,3]) -> f32[3] {
  %p = f32[2,3]{1,0} parameter(0)
  %z = f32[] constant(0)
  ROOT %r = f32[3]{0} reduce(f32[2,3]{1,0} %p, f32[] %z), dimensions={0}, to_apply=%add, metadata={op_name="sum"}
}

"""


def test_compact_operands():
    text = print_hlo_text(parse_hlo_text(SIMPLE), print_operand_shapes=False)
    assert "reduce(%p, %z)" in text


def test_attribute_spelling():
    text = print_hlo_text(parse_hlo_text(SNIPPETS["custom_call_everything"]))
    line = next(l for l in text.splitlines() if "%a = " in l)
    assert line.index("custom_call_target=") < line.index("operand_layout_constraints=") < line.index(
        "custom_call_has_side_effect=true") < line.index("output_to_operand_aliasing={{}: (0, {})}") < line.index(
        "schedule=SCHEDULE_LATEST") < line.index("api_version=API_VERSION_STATUS_RETURNING") < line.index("backend_config=")
    assert 'backend_config="eyJrIjogMX0=\\n\\"q\\"\\001"' in line
    conv = print_hlo_text(parse_hlo_text(SNIPPETS["convolution"]))
    assert "window={size=3x3 stride=2x1 pad=1_1x0_0}, dim_labels=b01f_01io->b01f, operand_precision={default,high}" in conv


def test_scheduled_module_prints_schedule_order():
    m = parse_hlo_text(SNIPPETS["fusion_scheduled_control"])
    entry = m.computations[1]
    seq = m.schedule.sequences[entry.id].instruction_ids
    reordered = [seq[0], seq[2], seq[1], seq[3]]  # fusion before copy: still a valid order
    del seq[:]
    seq.extend(reordered)
    text = print_hlo_text(m)
    assert text.startswith("HloModule sched, is_scheduled=true,")
    body = text[text.index("ENTRY"):]
    assert body.index("%a = ") < body.index("%b = ")
    again = parse_hlo_text(text)
    assert list(again.schedule.sequences[again.computations[1].id].instruction_ids) == [
        i.id for i in again.computations[1].instructions]
    assert [i.name for i in again.computations[1].instructions] == ["x", "a", "b", "r"]


@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_snippet_round_trip(name):
    ours = parse_hlo_text(SNIPPETS[name])
    again = parse_hlo_text(print_hlo_text(ours))
    assert canonical_module(again) == canonical_module(ours)
    assert again == ours  # our own round trip keeps even the ids


def test_negative_zero_and_nan_payload_survive():
    m = parse_hlo_text("HloModule m\nENTRY e {\n  ROOT c = f32[3] constant({-0.0, nan(0x400001), -nan})\n}")
    text = print_hlo_text(m)
    assert "constant({-0.0, nan(0x400001), -nan})" in text
    assert parse_hlo_text(text) == m


def test_proto_built_by_hand_prints():
    m = parse_hlo_text(SIMPLE)
    m2 = hlo_pb2.HloModuleProto()
    m2.CopyFrom(m)
    m2.ClearField("host_program_shape")
    for comp in m2.computations:
        comp.ClearField("program_shape")
    text = print_hlo_text(m2)
    assert "ENTRY %e {" in text
    assert canonical_module(parse_hlo_text(text)) == canonical_module(m)


def test_optional_attribute_printed_only_when_set():
    m = parse_hlo_text("HloModule m\nENTRY e {\n  x = f32[4] parameter(0)\n"
                       "  s = (f32[4], f32[4], u32[]) copy-start(x)\n  ROOT d = f32[4] copy-done(s)\n}")
    assert "cross_program_prefetch_index" not in print_hlo_text(m)
    copy_start = m.computations[0].instructions[1]
    copy_start.cross_program_prefetch_index = 0
    assert "copy-start(f32[4]{0} %x), cross_program_prefetch_index=0" in print_hlo_text(m)


def test_unprintable_proto_is_an_hlo_error():
    from hlo.errors import HloError

    m = parse_hlo_text(SNIPPETS["constants_all_types"])
    broken = hlo_pb2.HloModuleProto()
    broken.CopyFrom(m)
    constant = broken.computations[0].instructions[1]
    constant.literal.s8s = b"\x01"  # one value for a shape of two
    with pytest.raises(HloError, match="cannot be printed"):
        print_hlo_text(broken)


def test_bad_names_and_dangling_ids_are_hlo_errors():
    from hlo.errors import HloError

    m = parse_hlo_text(SIMPLE)
    for mutate in (lambda p: setattr(p.computations[0].instructions[0], "name", "a b"),
                   lambda p: p.computations[1].instructions[2].operand_ids.append(999),
                   lambda p: p.computations[1].instructions[2].called_computation_ids.__setitem__(0, 77)):
        broken = hlo_pb2.HloModuleProto()
        broken.CopyFrom(m)
        mutate(broken)
        with pytest.raises(HloError, match="cannot be printed"):
            print_hlo_text(broken)


def test_async_shorthand_only_when_it_reads_back_the_same():
    explicit = parse_hlo_text(SNIPPETS["async_wrapped"])  # wrapped computation named %wrapped
    text = print_hlo_text(explicit)
    assert "async-start(" in text and "calls=%wrapped" in text and "negate-start" not in text
    shorthand = parse_hlo_text(SNIPPETS["async_shorthand"])  # names as XLA makes them up
    text = print_hlo_text(shorthand)
    assert "add-start(" in text and "reduce-update(" in text and "%async_wrapped" not in text
    assert canonical_module(parse_hlo_text(text)) == canonical_module(shorthand)
