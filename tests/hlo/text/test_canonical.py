"""The canonical form that defines "same module" for the text layer (hlo/text/canonical.py)."""
from __future__ import annotations

from hlo.schema import hlo_pb2
from hlo.text import parse_hlo_text
from hlo.canonical import canonical_module
from tests.hlo.text.snippets import SNIPPETS

TEXT = SNIPPETS["while_conditional_call"]


def test_ids_do_not_matter():
    m = parse_hlo_text(TEXT)
    shifted = hlo_pb2.HloModuleProto()
    shifted.CopyFrom(m)
    shift = 1000
    for comp in shifted.computations:
        comp.id += shift
        comp.root_id += 7
        for inst in comp.instructions:
            inst.id += 7
            inst.operand_ids[:] = [o + 7 for o in inst.operand_ids]
            inst.called_computation_ids[:] = [c + shift for c in inst.called_computation_ids]
    shifted.entry_computation_id += shift
    shifted.id = 42
    assert canonical_module(shifted) == canonical_module(m)


def test_meaningful_changes_do_matter():
    m = parse_hlo_text(TEXT)
    changed = hlo_pb2.HloModuleProto()
    changed.CopyFrom(m)
    changed.computations[-1].instructions[-1].opcode = "copy"
    assert canonical_module(changed) != canonical_module(m)
    changed.CopyFrom(m)
    changed.computations[0].instructions[0].shape.dimensions.append(3)
    assert canonical_module(changed) != canonical_module(m)


def test_xla_load_defaults_are_filled():
    m = parse_hlo_text(SNIPPETS["dot_algorithm"])
    bare = hlo_pb2.HloModuleProto()
    bare.CopyFrom(m)
    dot = bare.computations[0].instructions[-1]
    dot.ClearField("precision_config")
    dot.precision_config.algorithm = m.computations[0].instructions[-1].precision_config.algorithm
    for inst in bare.computations[0].instructions:
        inst.shape.ClearField("is_dynamic_dimension")
        inst.shape.layout.tail_padding_alignment_in_elements = 0
    assert canonical_module(bare) == canonical_module(m)
    assert canonical_module(bare, fill_defaults=False) != canonical_module(m, fill_defaults=False)


def test_stack_frames_compare_by_call_chain():
    m = parse_hlo_text("""HloModule m
FileNames
1 "unused.py"
2 "a.py"
FunctionNames
1 "f"
FileLocations
1 {file_name_id=1 function_name_id=1 line=1 end_line=1 column=1 end_column=1}
2 {file_name_id=2 function_name_id=1 line=3 end_line=3 column=1 end_column=9}
StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=1}
ENTRY e {
  ROOT p = f32[] parameter(0), metadata={op_name="x" stack_frame_id=2}
}""")
    compact = parse_hlo_text("""HloModule m
FileNames
1 "a.py"
FunctionNames
1 "f"
FileLocations
1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=1 end_column=9}
StackFrames
1 {file_location_id=1 parent_frame_id=1}
ENTRY e {
  ROOT p = f32[] parameter(0), metadata={op_name="x" stack_frame_id=1}
}""")
    assert m != compact
    assert canonical_module(m) == canonical_module(compact)
