"""docs/gpsimd.md's multicore C++ example builds and runs as written (files marked
`<!-- file: NAME -->`), in a fresh interpreter with the SDK's import names, as a user runs it."""
from __future__ import annotations

import re
from pathlib import Path

from tests.sdk.subproc import ROOT, check, run_python

GUIDE = ROOT / "docs" / "gpsimd.md"
_FILE = re.compile(r"<!-- file: (\S+) -->\n```\w*\n(.*?)^```", re.S | re.M)


def test_the_multicore_example_builds_and_matches_torch_relu(tmp_path: Path) -> None:
    files = dict(_FILE.findall(GUIDE.read_text()))
    assert set(files) == {"relu_mc.cpp", "relu_mc_shape.cpp", "relu_mc.py"}
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    check(run_python(["relu_mc.py"], cwd=tmp_path, timeout=600))
