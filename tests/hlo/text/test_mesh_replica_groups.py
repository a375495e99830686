"""The mesh-axes form of replica_groups in HLO text (`mesh['x'=2,'y'=4] {'y'}`), against XLA's own
parser and printer (jaxlib 0.10.2): the same proto from the same text, the same text from the
same proto, and clear errors for what XLA refuses."""
from __future__ import annotations

import pytest

import hlo
from hlo.errors import HloParseError
from hlo.schema import hlo_pb2
from hlo.text import parse_hlo_text
from tests.hlo.text.oracle import xla_parse, xla_text

_MODULE = """HloModule m, replica_count=8
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
ENTRY e {
  p = f32[4,6] parameter(0)
  ROOT r = f32[4,6] all-reduce(p), replica_groups=GROUPS, to_apply=add
}
"""

#: forms as XLA prints them (the first five) and spellings its parser also reads
FORMS = [
    "mesh['x'=2,'y'=4] {'y'}",
    "mesh['x'=8] {'x':(2)2}",
    "mesh['x'=2,'y'=4], device_ids=(7,6,5,4,3,2,1,0) {'x'}",
    "mesh['x'=2,'y'=4], device_ids=([4,2]T(1,0)) {'y','x'}",
    "mesh['x'=2,'y'=4] {'y':(2)2,'x'}",
    "mesh['x'=2, 'y'=4] { 'y' }",
    "mesh[\"x\"=2,\"y\"=4] {\"y\"}",
    "mesh['x'=2,'y'=4],device_ids=([8]) {'x'}",
    "mesh['data'=4,'model'=2] {'model','data'}",
    "mesh['x'=2,'y'=4], device_ids=([4,2]T(0,1)) {'y'}",
]


def _groups(proto: hlo_pb2.HloModuleProto) -> hlo_pb2.HloInstructionProto:
    (inst,) = [i for c in proto.computations for i in c.instructions if i.opcode == "all-reduce"]
    return inst


@pytest.mark.parametrize("form", FORMS)
def test_parses_as_xla_does(form):
    text = _MODULE.replace("GROUPS", form)
    ours, theirs = _groups(parse_hlo_text(text)), _groups(xla_parse(text))
    assert ours.HasField("mesh_axes_replica_group_list")
    assert ours.mesh_axes_replica_group_list == theirs.mesh_axes_replica_group_list
    assert not ours.collective_device_list.replica_groups and not ours.replica_groups


@pytest.mark.parametrize("form", FORMS[:5])
def test_prints_as_xla_does(form):
    """XLA's printing of the proto our parser made equals ours (for the forms it prints as given)."""
    module = hlo.load(_MODULE.replace("GROUPS", form))
    line = next(x for x in module.to_text().splitlines() if "all-reduce(" in x)
    xla_line = next(x for x in xla_text(module.to_bytes()).splitlines() if "all-reduce(" in x)
    ours = line.split("replica_groups=")[1].split(", to_apply")[0]
    assert ours == form
    assert xla_line.split("replica_groups=")[1].split(", to_apply")[0] == form


@pytest.mark.parametrize("form", FORMS)
def test_round_trip(form):
    """Text -> proto -> our text -> proto keeps the groups; the binary proto keeps them too."""
    module = hlo.load(_MODULE.replace("GROUPS", form))
    first = _groups(parse_hlo_text(_MODULE.replace("GROUPS", form))).mesh_axes_replica_group_list
    assert _groups(parse_hlo_text(module.to_text())).mesh_axes_replica_group_list == first
    assert _groups(hlo_pb2.HloModuleProto.FromString(module.to_bytes())).mesh_axes_replica_group_list == first


@pytest.mark.parametrize("form, message", [
    ("mesh['x'=2,'y'=4] {'z'}", "'z' is not an axis of the mesh"),
    ("mesh['x'=2,'x'=4] {'x'}", "named twice"),
    ("mesh[x=2,y=4] {y}", "a quoted string"),
    ("mesh['x'=0] {'x'}", "of size 0"),
    ("mesh['x'=8] {'x':(0)2}", "sizes are positive"),
    ("mesh['x'=4], device_ids=([2,2]T(0,0)) {'x'}", "not a permutation"),
    ("mesh['x'=4], device_ids=([2,2]) {'x'}", "'T\\(' and a transpose"),
    ("mesh['x'=2,'y'=4 {'y'}", "the mesh's axes"),
    ("mesh['x'=2] {'x}", "unterminated string"),
])
def test_malformed_is_a_parse_error(form, message):
    with pytest.raises(HloParseError, match=message):
        parse_hlo_text(_MODULE.replace("GROUPS", form))
