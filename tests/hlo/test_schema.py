"""The HLO schema (hlo/schema) is reproducible and reads real framework modules without loss.

What is checked, and why:
- the committed *_pb2 files equal a fresh build by the pinned protoc (nobody hand-edits them);
- our descriptors equal the XLA schema compiled into jaxlib, and agree with torch_xla's except
  where XLA itself changed a message since torch_xla's build (listed below);
- live modules from JAX and torch_xla decode with no unknown field anywhere in the tree, and
  re-encode to an equal message (byte-identical unless a map's order is unspecified);
- torch_xla's protobuf text of a module parses into the same message as its binary (its JSON is
  not compared: Python's json_format rejects the 9-digit spelling of -FLT_MAX that XLA prints);
- our package name `xla` does not clash with descriptors the frameworks register in Python.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from google.protobuf import (
    descriptor,
    descriptor_pb2,
    descriptor_pool,
    message,
    text_format,
    unknown_fields,
)

from hlo.schema import hlo_pb2, xla_data_pb2
from tests.hlo import embedded_descriptors as ed
from tests.hlo import framework_modules as fm
from tools import gen_proto

# In jaxlib's hlo.proto but deliberately not in ours (see hlo/schema/hlo.proto).
OMITTED = {".xla.HloModuleMetadataProto", ".xla.HloPassMetadata"}

# Where torch_xla 2.9's older XLA differs from ours (= jaxlib's) because XLA changed since.
# (message, field number or None for the whole message) -> what happened.
TORCH_XLA_KNOWN_DIFFERENCES = {
    (".xla.CollectiveDeviceListProto", 2): "iota groups moved to HloInstructionProto field 92",
    (".xla.OriginalValueProto", 1): "original-value tracking was redesigned",
    (".xla.OriginalValueProto", 2): "original-value tracking was redesigned",
    (".xla.OriginalValueNodeProto", None): "original-value tracking was redesigned",
    (".xla.OriginalValueRecoveryTableProto.Entry", 1): "renamed old_original_array",
    (".xla.OriginalValueRecoveryTableProto.Entry", 2): "renamed new_original_array",
    (".xla.HloModuleProto.ProfileGenerationStrategy", None): "enum moved to xla_data.proto",
    (".xla.HloModuleProto.ProfileInfo", 6): "its enum moved to xla_data.proto",
}


def _our_descriptors() -> dict[str, ed.Shape]:
    files = []
    for module in (xla_data_pb2, hlo_pb2):
        fd = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(fd)
        files.append(fd)
    return ed.flatten(files)


def _framework_descriptors(library) -> dict[str, ed.Shape]:
    paths = ("xla/xla_data.proto", "xla/service/hlo.proto")
    return ed.flatten([ed.embedded_file_descriptor(library, p) for p in paths])


def _submessages(msg: message.Message, path: str) -> Iterator[tuple[str, message.Message]]:
    """msg and every message below it, with a readable path."""
    yield path, msg
    for fd, value in msg.ListFields():
        if fd.type != descriptor.FieldDescriptor.TYPE_MESSAGE:
            continue
        if fd.message_type.GetOptions().map_entry:
            value_field = fd.message_type.fields_by_name["value"]
            if value_field.type == descriptor.FieldDescriptor.TYPE_MESSAGE:
                for key, item in value.items():
                    yield from _submessages(item, f"{path}.{fd.name}[{key!r}]")
        elif isinstance(value, message.Message):
            yield from _submessages(value, f"{path}.{fd.name}")
        else:
            for i, item in enumerate(value):
                yield from _submessages(item, f"{path}.{fd.name}[{i}]")


def unknown_field_paths(msg: message.Message) -> list[str]:
    """Where in the tree the parser kept fields our schema does not define (empty: none)."""
    found = []
    for path, sub in _submessages(msg, type(msg).__name__):
        numbers = sorted({f.field_number for f in unknown_fields.UnknownFieldSet(sub)})
        if numbers:
            found.append(f"{path}: unknown field numbers {numbers}")
    return found


def _has_map_with_several_entries(msg: message.Message) -> bool:
    return any(
        fd.message_type is not None and fd.message_type.GetOptions().map_entry and len(value) > 1
        for _, sub in _submessages(msg, "")
        for fd, value in sub.ListFields()
    )


# ------------------------------------------------------------------------------------------------


def test_generated_modules_match_their_sources() -> None:
    try:
        gen_proto.check_protoc_version()
    except gen_proto.VersionMismatch as e:
        pytest.fail(str(e))
    assert gen_proto.differences() == [], "run: python tools/gen_proto.py"


def test_schema_equals_the_one_compiled_into_jaxlib() -> None:
    theirs = _framework_descriptors(ed.jaxlib_library())
    ours = _our_descriptors()
    assert set(theirs) - set(ours) == OMITTED
    assert set(ours) - set(theirs) == set()
    for name in sorted(ours):
        assert ours[name] == theirs[name], name


def test_schema_agrees_with_torch_xla_except_where_xla_changed() -> None:
    theirs = _framework_descriptors(ed.torch_xla_library())
    ours = _our_descriptors()
    problems = []
    for name, shape in theirs.items():
        if name in OMITTED or (name, None) in TORCH_XLA_KNOWN_DIFFERENCES:
            continue
        if name not in ours:
            problems.append(f"{name}: missing")
        elif "values" in shape:
            missing = set(shape["values"]) - set(ours[name]["values"])
            if missing:
                problems.append(f"{name}: enum values {sorted(missing)} missing")
        else:
            for number, field in shape["fields"].items():
                if (name, number) in TORCH_XLA_KNOWN_DIFFERENCES:
                    continue
                # name, type, label, message/enum type: what the binary and text formats see
                # (oneof membership and proto3 `optional` do not change either).
                mine = ours[name]["fields"].get(number)
                if mine is None or mine[:4] != field[:4]:
                    problems.append(f"{name} field {number}: {field} vs ours {mine}")
    assert problems == []


def test_unknown_field_walker_sees_nested_unknowns() -> None:
    """The live-module checks below are only as good as this walker."""
    inner = hlo_pb2.HloInstructionProto(name="x", opcode="parameter")
    extra = bytes([0xB8, 0x3E, 0x01])  # tag (999 << 3) as a varint, then value 1: field 999
    bad = hlo_pb2.HloInstructionProto.FromString(inner.SerializeToString() + extra)
    module = hlo_pb2.HloModuleProto(computations=[hlo_pb2.HloComputationProto(instructions=[bad])])
    module = hlo_pb2.HloModuleProto.FromString(module.SerializeToString())
    assert unknown_field_paths(module) == [
        "HloModuleProto.computations[0].instructions[0]: unknown field numbers [999]"
    ]


@pytest.mark.parametrize("name", fm.names())
def test_live_module_decodes_without_loss(name: str) -> None:
    raw = fm.serialized(name)
    module = hlo_pb2.HloModuleProto.FromString(raw)
    assert module.computations and module.entry_computation_name
    assert unknown_field_paths(module) == []
    again = module.SerializeToString()
    assert hlo_pb2.HloModuleProto.FromString(again) == module
    if not _has_map_with_several_entries(module):
        assert again == raw


@pytest.mark.parametrize("name", fm.names(fm.TORCH_XLA))
def test_torch_xla_protobuf_text_equals_the_binary(name: str) -> None:
    lowered = fm.lowered(name)
    binary = hlo_pb2.HloModuleProto.FromString(lowered.proto)
    assert lowered.text is not None
    assert text_format.Parse(lowered.text, hlo_pb2.HloModuleProto()) == binary


def test_no_descriptor_clash_with_the_frameworks() -> None:
    for framework in (fm.JAX, fm.TORCH_XLA):
        fm.serialized(fm.names(framework)[0])  # imports and uses the framework
    pool = descriptor_pool.Default()
    assert pool.FindMessageTypeByName("xla.HloModuleProto").file.name == "hlo/schema/hlo.proto"
    assert pool.FindMessageTypeByName("xla.ShapeProto").file.name == "hlo/schema/xla_data.proto"
