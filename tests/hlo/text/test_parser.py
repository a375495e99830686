"""The parser on hand-written snippets: every attribute kind lands in its proto field, as XLA's
parser would put it; structure (ids, program shapes, schedule, aliasing) is filled; errors say
where and what."""
from __future__ import annotations

import pytest

from hlo.errors import HloParseError
from hlo.schema import hlo_pb2, xla_data_pb2
from hlo.text import parse_hlo_text

PT = xla_data_pb2.PrimitiveType


def module(body: str, header: str = "HloModule m", extra: str = "") -> hlo_pb2.HloModuleProto:
    return parse_hlo_text(f"{header}\n{extra}\nENTRY e {{\n{body}\n}}\n")


def inst(m: hlo_pb2.HloModuleProto, name: str) -> hlo_pb2.HloInstructionProto:
    return next(i for c in m.computations for i in c.instructions if i.name == name)


def test_structure_ids_program_shapes():
    m = parse_hlo_text("""HloModule m
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %c = f32[] add(%a, %b)
}
ENTRY %e {
  %q = f32[3] parameter(1)
  %p = f32[2,3] parameter(0)
  %z = f32[] constant(0)
  ROOT %r = f32[3] reduce(%p, %z), dimensions={0}, to_apply=%add
  %dead = f32[3] negate(%q)
}""")
    add, entry = m.computations
    assert (add.id, entry.id, m.entry_computation_id, m.entry_computation_name) == (0, 1, 1, "e")
    assert [i.id for i in entry.instructions] == [(1 << 32) | k for k in range(5)]
    r = inst(m, "r")
    assert entry.root_id == r.id
    assert list(r.operand_ids) == [inst(m, "p").id, inst(m, "z").id]
    assert list(r.called_computation_ids) == [add.id]
    assert list(entry.program_shape.parameter_names) == ["p", "q"]
    assert [list(s.dimensions) for s in entry.program_shape.parameters] == [[2, 3], [3]]
    assert list(m.host_program_shape.parameter_names) == ["p0", "p1"]
    # layouts filled as XLA does when the text has none
    assert list(inst(m, "p").shape.layout.minor_to_major) == [1, 0]
    assert inst(m, "p").shape.layout.tail_padding_alignment_in_elements == 1
    assert list(inst(m, "p").shape.is_dynamic_dimension) == [False, False]


def test_root_defaults_to_last_instruction_and_entry_to_last_computation():
    m = parse_hlo_text("HloModule m\nc1 {\n a = f32[] parameter(0)\n}\nc2 {\n x = f32[] parameter(0)\n y = f32[] negate(x)\n}")
    assert m.entry_computation_name == "c2"
    assert m.computations[1].root_id == inst(m, "y").id


def test_shapes_layouts_tiles_dynamic():
    m = module("  ROOT p = (f32[8,128]{1,0:T(8,128)(2,1)E(32)S(1)L(4)M(8)}, s32[<=4,?]{0,1}, token[], "
               "pred[]) parameter(0)")
    t = inst(m, "p").shape
    assert t.element_type == PT.TUPLE
    a, b, tok, pred = t.tuple_shapes
    assert [list(x.dimensions) for x in a.layout.tiles] == [[8, 128], [2, 1]]
    assert (a.layout.element_size_in_bits, a.layout.memory_space, a.layout.tail_padding_alignment_in_elements,
            a.layout.dynamic_shape_metadata_prefix_bytes) == (32, 1, 4, 8)
    assert list(b.dimensions) == [4, -(1 << 63)] and list(b.is_dynamic_dimension) == [True, True]
    assert tok.element_type == PT.TOKEN and not tok.HasField("layout")
    assert pred.layout.minor_to_major == []


def test_window_dim_labels_groups_precision():
    m = module("  x = f32[1,8,8,3] parameter(0)\n  k = f32[3,3,3,6] parameter(1)\n"
               "  ROOT c = f32[1,4,7,6] convolution(x, k), window={size=3x3 stride=2x1 pad=1_1x0_-1 lhs_dilate=1x2 "
               "rhs_dilate=2x1 rhs_reversal=0x1}, dim_labels=b01f_01io->b01f, feature_group_count=1, "
               "batch_group_count=1, operand_precision={default,highest}")
    c = inst(m, "c")
    d0, d1 = c.window.dimensions
    assert (d0.size, d0.stride, d0.padding_low, d0.padding_high, d0.base_dilation, d0.window_dilation,
            d0.window_reversal) == (3, 2, 1, 1, 1, 2, False)
    assert (d1.stride, d1.padding_high, d1.base_dilation, d1.window_reversal) == (1, -1, 2, True)
    dn = c.convolution_dimension_numbers
    assert (dn.input_batch_dimension, dn.input_feature_dimension, list(dn.input_spatial_dimensions)) == (0, 3, [1, 2])
    assert (dn.kernel_input_feature_dimension, dn.kernel_output_feature_dimension,
            list(dn.kernel_spatial_dimensions)) == (2, 3, [0, 1])
    assert (c.feature_group_count, c.batch_group_count) == (1, 1)
    assert list(c.precision_config.operand_precision) == [0, 2]


def test_dot_defaults_and_compare_type():
    m = module("  a = f32[2,3] parameter(0)\n  b = f32[3] parameter(1)\n  i = u8[3] parameter(2)\n"
               "  d = f32[2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
               "  c = pred[3] compare(i, i), direction=GT\n"
               "  ROOT t = pred[3] compare(b, b), direction=LT, type=TOTALORDER")
    d = inst(m, "d")
    assert list(d.dot_dimension_numbers.lhs_contracting_dimensions) == [1]
    assert list(d.precision_config.operand_precision) == [0, 0]  # XLA fills DEFAULT per operand
    assert (inst(m, "c").comparison_direction, inst(m, "c").comparison_type) == ("GT", "UNSIGNED")
    assert inst(m, "t").comparison_type == "TOTALORDER"


def test_slice_pad_gather_scatter_fields():
    m = module("  x = f32[8,9] parameter(0)\n  s = f32[3,4] slice(x), slice={[1:4], [0:8:2]}\n"
               "  z = f32[] constant(0)\n  p = f32[6,12] pad(s, z), padding=1_2x0_1_2\n"
               "  i = s32[2,1] parameter(1)\n"
               "  ROOT g = f32[2,9] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, "
               "index_vector_dim=1, slice_sizes={1,9}, indices_are_sorted=true")
    s = inst(m, "s")
    assert [(d.start, d.limit, d.stride) for d in s.slice_dimensions] == [(1, 4, 1), (0, 8, 2)]
    p = inst(m, "p").padding_config.dimensions
    assert [(d.edge_padding_low, d.edge_padding_high, d.interior_padding) for d in p] == [(1, 2, 0), (0, 1, 2)]
    g = inst(m, "g")
    assert list(g.gather_dimension_numbers.start_index_map) == [0]
    assert g.gather_dimension_numbers.index_vector_dim == 1
    assert list(g.gather_slice_sizes) == [1, 9] and g.indices_are_sorted


def test_custom_call_attributes():
    m = module('  x = f32[4] parameter(0)\n'
               '  ROOT c = (f32[4], s32[]) custom-call(x), custom_call_target="AwsNeuronCustomNativeKernel", '
               'operand_layout_constraints={f32[4]{0}}, custom_call_has_side_effect=true, '
               'output_to_operand_aliasing={{0}: (0, {})}, schedule=SCHEDULE_EARLIEST, '
               'api_version=API_VERSION_STATUS_RETURNING, backend_config="eyJrIjoxfQ==\\001"')
    c = inst(m, "c")
    assert c.custom_call_target == "AwsNeuronCustomNativeKernel"
    assert c.constrain_layout and list(c.operand_shapes_with_layout[0].dimensions) == [4]
    assert c.custom_call_has_side_effect
    alias = c.output_operand_aliasing[0]
    assert (list(alias.output_shape_index), alias.operand_index, list(alias.operand_shape_index)) == ([0], 0, [])
    assert c.custom_call_schedule == hlo_pb2.SCHEDULE_EARLIEST
    assert c.custom_call_api_version == hlo_pb2.API_VERSION_STATUS_RETURNING
    assert c.backend_config == b"eyJrIjoxfQ==\x01"


def test_custom_call_defaults_and_raw_json_backend_config():
    m = module('  x = f32[4] parameter(0)\n'
               '  ROOT c = f32[4] custom-call(x), custom_call_target="t", backend_config={"a": {"b": "}"}}')
    c = inst(m, "c")
    assert c.backend_config == b'{"a": {"b": "}"}}'
    assert c.custom_call_api_version == hlo_pb2.API_VERSION_ORIGINAL
    assert (c.feature_group_count, c.batch_group_count, list(c.precision_config.operand_precision)) == (1, 1, [0])


def test_sharding_metadata_frontend_attributes():
    m = module('  a = f32[8] parameter(0), sharding={devices=[2,2]<=[2,2]T(1,0) last_tile_dim_replicate}, '
               'metadata={op_type="Param" op_name="a/b" source_file="y.py" source_line=12 stack_frame_id=3}, '
               'frontend_attributes={_xla_stream="1", k="v"}\n'
               '  ROOT t = (f32[8], f32[8]) tuple(a, a), sharding={{maximal device=1}, {replicated}}')
    a = inst(m, "a")
    s = a.sharding
    assert (s.type, list(s.tile_assignment_dimensions), list(s.iota_reshape_dims), list(s.iota_transpose_perm),
            s.replicate_on_last_tile_dim) == (xla_data_pb2.OpSharding.OTHER, [2, 2], [2, 2], [1, 0], True)
    md = a.metadata
    assert (md.op_type, md.op_name, md.source_file, md.source_line, md.stack_frame_id) == ("Param", "a/b", "y.py", 12, 3)
    assert dict(a.frontend_attributes.map) == {"_xla_stream": "1", "k": "v"}
    t = inst(m, "t").sharding
    assert t.type == xla_data_pb2.OpSharding.TUPLE
    assert [x.type for x in t.tuple_shardings] == [xla_data_pb2.OpSharding.MAXIMAL, xla_data_pb2.OpSharding.REPLICATED]
    assert list(t.tuple_shardings[0].tile_assignment_devices) == [1]


def test_collectives():
    m = module("  x = f32[8] parameter(0)\n"
               "  a = f32[16] all-gather(x), channel_id=2, replica_groups=[2,2]<=[4], dimensions={0}, use_global_device_ids=true\n"
               "  ROOT p = f32[8] collective-permute(x), channel_id=3, source_target_pairs={{0,1},{1,0}}")
    a = inst(m, "a")
    iota = a.iota_collective_device_list
    assert (a.channel_id, iota.num_replica_groups, iota.num_devices_per_group, list(iota.iota_reshape_dims)) == (2, 2, 2, [4])
    assert a.use_global_device_ids and list(a.dimensions) == [0]
    assert [(p.source, p.target) for p in inst(m, "p").source_target_pairs] == [(0, 1), (1, 0)]


def test_misc_enums_and_scalars():
    m = module("  lo = f32[] constant(0)\n  r = f32[3] rng(lo, lo), distribution=rng_normal\n"
               "  s = u64[2] parameter(0)\n  b = (u64[2], u32[4]) rng-bit-generator(s), algorithm=rng_three_fry\n"
               "  c = c64[8] parameter(1)\n  f = c64[8] fft(c), fft_type=IFFT, fft_length={8}\n"
               "  x = f32[3] parameter(2)\n  p = f32[3] reduce-precision(x), exponent_bits=5, mantissa_bits=10\n"
               "  i = s32[4,3] iota(), iota_dimension=1\n  g = f32[] get-tuple-element(b), index=1\n"
               "  ROOT bn = (f32[3], f32[3], f32[3]) batch-norm-training(x, x, x), epsilon=0.001, feature_index=0")
    assert inst(m, "r").distribution == xla_data_pb2.RNG_NORMAL
    assert inst(m, "b").rng_algorithm == xla_data_pb2.RNG_THREE_FRY
    assert (inst(m, "f").fft_type, list(inst(m, "f").fft_length)) == (xla_data_pb2.IFFT, [8])
    assert (inst(m, "p").exponent_bits, inst(m, "p").mantissa_bits) == (5, 10)
    assert list(inst(m, "i").dimensions) == [1]
    assert inst(m, "g").tuple_index == 1
    assert inst(m, "bn").epsilon == pytest.approx(0.001) and inst(m, "bn").feature_index == 0


def test_module_header_schedule_alias_donor_frontend():
    m = parse_hlo_text("""HloModule m, is_scheduled=true, entry_computation_layout={(f32[4]{0}, f32[4]{0})->f32[4]{0}}, input_output_alias={ {}: (0, {}, must-alias) }, buffer_donor={ (1, {}) }, replica_count=2, frontend_attributes={k="v"}
%f (fp: f32[4]) -> f32[4] {
  %fp = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%fp)
}
ENTRY %e (x: f32[4], y: f32[4]) -> f32[4] {
  %y = f32[4]{0} parameter(1)
  %x = f32[4]{0} parameter(0)
  %a = f32[4]{0} fusion(%x), kind=kLoop, calls=%f
  ROOT %r = f32[4]{0} add(%a, %y), control-predecessors={%x}
}""")
    fused, entry = m.computations
    assert fused.is_fusion_computation and not entry.is_fusion_computation
    assert list(m.schedule.sequences) == [entry.id]
    assert list(m.schedule.sequences[entry.id].instruction_ids) == [i.id for i in entry.instructions]
    e = m.input_output_alias.entries[0]
    assert (list(e.output_shape_index), e.parameter_number, e.kind) == ([], 0, hlo_pb2.MUST_ALIAS)
    assert m.buffer_donor.entries[0].parameter_number == 1
    assert dict(m.frontend_attributes.map) == {"k": "v"}
    assert list(inst(m, "r").control_predecessor_ids) == [inst(m, "x").id]
    assert inst(m, "a").fusion_kind == "kLoop"


def test_stack_frame_tables():
    m = parse_hlo_text("""HloModule m

FileNames
1 "a.py"

FunctionNames
1 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=1 end_column=9}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=1 parent_frame_id=2}

ENTRY e {
  ROOT p = f32[] parameter(0), metadata={op_name="x" stack_frame_id=2}
}""")
    idx = m.stack_frame_index
    assert list(idx.file_names) == ["a.py"] and list(idx.function_names) == ["f"]
    assert idx.file_locations[0].end_column == 9
    # XLA's text shows parent ids one above the proto's: "1" means no parent
    assert [(f.file_location_id, f.parent_frame_id) for f in idx.stack_frames] == [(1, 0), (1, 1)]


def test_names_with_or_without_percent_and_inline_operand_shapes():
    a = module("  %p = f32[2] parameter(0)\n  ROOT %n = f32[2] negate(f32[2]{0} %p)")
    b = module("  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p)")
    assert a == b


@pytest.mark.parametrize("body, message", [
    ("  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(q)", "operand 'q' is not defined"),
    ("  p = f32[2] parameter(0)\n  n = f32[2] negate(q)\n  q = f32[2] negate(p)", "operand 'q' is used before it is defined"),
    ("  p = f32[2] parameter(0)\n  p = f32[2] parameter(1)", "instruction 'p' defined twice"),
    ("  p = f32[2] parameter(0)\n  ROOT n = f32[2] frobnicate(p)", "unknown opcode 'frobnicate'"),
    ("  p = f32[2] parameter(0)\n  ROOT r = f32[] reduce(p, p), dimensions={0}, to_apply=nope",
     "computation 'nope' is not defined"),
    ("  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p), bogus=1", "unknown attribute 'bogus' for opcode negate"),
    ("  p = f32[2] parameter(0)\n  ROOT c = pred[2] compare(p, p)", "needs attribute 'direction'"),
    ("  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p p)", "expected ',' or ')' after operand, found 'p'"),
    ("  p = f32[2] parameter(1)", "parameters are not numbered 0..0"),
    ("  ROOT c = f32[1000000,1000000] constant({1})", "elements (the limit)"),
    ("  ROOT c = f32[2] constant({1, 2, 3})", "expected '}' after 2 elements"),
    ("  ROOT c = s8[1] constant({300})", "out of range"),
    ("  ROOT p = f32[2]{0,0} parameter(0)", "not a permutation"),
])
def test_errors_name_the_problem_and_place(body, message):
    with pytest.raises(HloParseError) as info:
        parse_hlo_text(f"HloModule m\nENTRY e {{\n{body}\n}}\n", "model.hlo")
    err = info.value
    assert message in str(err)
    assert err.filename == "model.hlo" and err.line >= 2 and err.column >= 1
    assert str(err).startswith(f"model.hlo:{err.line}:{err.column}: ")


def test_error_has_expected_and_found():
    with pytest.raises(HloParseError) as info:
        parse_hlo_text("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p foo)\n}", "model.hlo")
    err = info.value
    assert (err.line, err.column, err.expected, err.found) == (4, 28, "',' or ')'", "'foo'")
    assert str(err) == "model.hlo:4:28: expected ',' or ')' after operand, found 'foo'"


def test_duplicate_computation_and_self_call_are_errors():
    with pytest.raises(HloParseError, match="defined twice"):
        parse_hlo_text("HloModule m\nc {\n ROOT a = f32[] parameter(0)\n}\nc {\n ROOT a = f32[] parameter(0)\n}")
    with pytest.raises(HloParseError, match="'f' is used before it is defined"):
        parse_hlo_text("HloModule m\nENTRY e {\n a = f32[] parameter(0)\n ROOT b = f32[] call(a), to_apply=f\n}\n"
                       "f {\n ROOT x = f32[] parameter(0)\n}")
    with pytest.raises(HloParseError, match="calls itself"):
        parse_hlo_text("HloModule m\nENTRY c {\n a = f32[] parameter(0)\n ROOT b = f32[] call(a), to_apply=c\n}")


def test_async_shorthand_builds_the_wrapped_computation():
    from tests.hlo.text.snippets import SNIPPETS

    m = parse_hlo_text(SNIPPETS["async_shorthand"])
    names = [c.name for c in m.computations]
    assert names == ["sum", "async_wrapped", "async_wrapped.1", "async_wrapped.2", "e"]  # callees first
    assert [c.id for c in m.computations] == list(range(5)) and m.entry_computation_id == 4
    wrapped = m.computations[1]
    assert [(i.name, i.opcode) for i in wrapped.instructions] == [
        ("async_param", "parameter"), ("async_param.1", "parameter"), ("add", "add")]
    st = inst(m, "st")
    assert (st.opcode, list(st.called_computation_ids)) == ("async-start", [1])
    assert st.backend_config == b"cfg" and inst(m, "add").backend_config == b"cfg"
    assert inst(m, "dn").opcode == "async-done" and inst(m, "ru").opcode == "async-update"
    reduce_ = next(i for i in m.computations[2].instructions if i.opcode == "reduce")
    assert list(reduce_.called_computation_ids) == [0] and list(reduce_.dimensions) == [0]
    assert m.computations[2].execution_thread == "t" and m.computations[0].execution_thread == "t"


def test_signature_result_must_agree_with_the_body():
    with pytest.raises(HloParseError, match="declares shape f32\\[4\\] where its body has f32\\[2\\]"):
        parse_hlo_text("HloModule m\nENTRY e (x: f32[2]) -> f32[4] {\n  ROOT x = f32[2] parameter(0)\n}")
    # the written parameters are not checked, as in XLA's parser (jaxlib 0.10.2 accepts both)
    for params in ("x: f32[2], y: f32[2]", "x: f32[3]"):
        m = parse_hlo_text(f"HloModule m\nENTRY e ({params}) -> f32[2] {{\n  ROOT x = f32[2] parameter(0)\n}}")
        assert len(m.computations[0].program_shape.parameters) == 1
    assert parse_hlo_text("HloModule m\nENTRY e (x: f32[2]{0}) -> f32[2] {\n  ROOT x = f32[2]{0} parameter(0)\n}")


def test_nested_instructions_are_placed_before_their_user():
    m = module("  x = f32[2] parameter(0)\n  ROOT r = f32[2] add(f32[2] negate(f32[2] negate(x)), x)")
    names = [i.name for i in m.computations[0].instructions]
    assert names == ["x", "negate.anon", "negate.anon.1", "r"]
    assert list(inst(m, "r").operand_ids) == [inst(m, "negate.anon.1").id, inst(m, "x").id]
