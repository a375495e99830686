"""hlo.load: recognising the form, every kind of source, and the errors of the binary and pbtxt readers."""
from __future__ import annotations

import pytest

import hlo
from tests.hlo import framework_modules as fm

NAME = "jax/mlp_grad"


@pytest.fixture(scope="module")
def module():
    return hlo.load(fm.serialized(NAME))


def test_detects_each_form(module):
    assert hlo.detect_form(module.to_bytes()) is hlo.Form.PROTO
    assert hlo.detect_form(module.to_pbtxt().encode()) is hlo.Form.PBTXT
    assert hlo.detect_form(b"// dumped\n  HloModule m\n") is hlo.Form.TEXT
    assert hlo.detect_form(b"# comment\ncomputations {\n}") is hlo.Form.PBTXT


def test_loads_paths_bytes_strings_and_protos(module, tmp_path):
    want = module.to_proto()
    (tmp_path / "m.pb").write_bytes(module.to_bytes())
    (tmp_path / "m.pbtxt").write_text(module.to_pbtxt())
    assert hlo.load(tmp_path / "m.pb").to_proto() == want
    assert hlo.load(str(tmp_path / "m.pbtxt")).to_proto() == want
    assert hlo.load(bytearray(module.to_bytes())).to_proto() == want
    assert hlo.load(want).to_proto() == want
    # an explicit form overrides detection
    assert hlo.load(module.to_bytes(), form="proto").to_proto() == want


def test_missing_file_is_an_hlo_error(tmp_path):
    with pytest.raises(hlo.HloError, match="cannot read HLO module .*nothing.pb"):
        hlo.load(tmp_path / "nothing.pb")


def test_garbage_bytes_name_the_file(tmp_path):
    path = tmp_path / "junk.pb"
    path.write_bytes(b"\xff\xfe\x00\x01garbage\x99")
    with pytest.raises(hlo.HloParseError) as info:
        hlo.load(path)
    assert str(path) in str(info.value)
    assert "HloModuleProto" in str(info.value)


def test_pbtxt_errors_carry_line_and_column(tmp_path):
    path = tmp_path / "bad.pbtxt"
    path.write_text('name: "m"\ncomputations {\n  name: "c"\n  no_such_field: 3\n}\n')
    with pytest.raises(hlo.HloParseError) as info:
        hlo.load(path)
    e = info.value
    assert (e.filename, e.line) == (str(path), 4) and e.column > 0
    assert "no_such_field" in str(e) and str(e).startswith(f"{path}:4:")


def test_a_forced_wrong_form_is_a_parse_error(module):
    with pytest.raises(hlo.HloParseError):
        hlo.load(module.to_pbtxt().encode(), form="proto")
