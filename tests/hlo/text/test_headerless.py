"""HLO text without its `HloModule` header, as XLA's own test files are written: XLA's parser takes
it (module named `module_<entry>`, entry = the ENTRY computation, else the last one), and so must
hlo.load, from a string or a file, without being told the form. Before, `add {` was taken for the
protobuf text field `add` and refused."""
from __future__ import annotations

import numpy as np
import pytest

import hlo
from hlo.readers import Form, detect_form
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable
from tests.hlo.text.oracle import canonical_diff, xla_parse
from tests.neuron_customcall.compiler.ours import assert_close, compile_proto, rand

LAST_IS_ENTRY = """// a comment before the first computation
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

rows {
  x = f32[3,5] parameter(0)
  z = f32[] constant(0)
  r = f32[3] reduce(x, z), dimensions={1}, to_apply=sum
  ROOT n = f32[3] negate(r)
}
"""

MARKED_ENTRY = """
%double {
  %p = s32[4] parameter(0)
  ROOT %d = s32[4] add(%p, %p)
}

ENTRY %main {
  %q = s32[4] parameter(0)
  ROOT %c = s32[4] call(%q), to_apply=%double
}

%unused {
  ROOT %k = f32[] constant(1)
}
"""

PROTOBUF_TEXT = 'name: "m"\nentry_computation_name: "e"\n'


@pytest.mark.parametrize("text", [LAST_IS_ENTRY, MARKED_ENTRY], ids=["last_is_entry", "marked_entry"])
def test_headerless_text_reads_as_xla_reads_it(text):
    assert detect_form(text.encode()) is Form.TEXT
    ours = hlo.load(text)
    theirs = xla_parse(text)
    assert ours.name == theirs.name and ours.entry.name == theirs.entry_computation_name
    diff = canonical_diff(ours.to_proto(), theirs)
    assert not diff, diff


def test_headerless_text_from_a_file(tmp_path):
    path = tmp_path / "fusion_test.hlo"
    path.write_text(LAST_IS_ENTRY)
    assert hlo.load(path).entry.name == "rows"


def test_headerless_text_runs_as_on_xla_cpu():
    inputs = [rand(3, 5)]
    ours = compile_proto(hlo.load(LAST_IS_ENTRY).to_bytes()).run(inputs)
    ref = XlaCpuExecutable(xla_parse(LAST_IS_ENTRY).SerializeToString()).run(inputs)
    assert_close(ours, ref)
    ints = [np.array([1, -2, 3, 40], np.int32)]
    assert_close(compile_proto(hlo.load(MARKED_ENTRY).to_bytes()).run(ints),
                 XlaCpuExecutable(xla_parse(MARKED_ENTRY).SerializeToString()).run(ints))


def test_protobuf_text_is_still_protobuf_text():
    assert detect_form(PROTOBUF_TEXT.encode()) is Form.PBTXT
    assert detect_form(b"computations {\n  name: \"e\"\n}\n") is Form.PBTXT
    with pytest.raises(hlo.HloParseError, match="protobuf text"):
        hlo.load("nonsense: 1\n")
