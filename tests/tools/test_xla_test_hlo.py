"""tools/xla_test_hlo.py: which raw strings of a C++ test file are complete HLO modules, and the
extraction from a git tree (a throwaway repository made here), duplicates written once."""
from __future__ import annotations

import subprocess
from pathlib import Path

from tools import xla_test_hlo as xt

MODULE = """HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}"""

SOURCE = f'''
TEST_F(T, A) {{
  const char* kHlo = R"(
{MODULE}
)";
  const char* kTagged = R"hlo(
{MODULE.replace("negate", "abs")}
)hlo";
  auto tmpl = absl::Substitute(R"(
HloModule t
ENTRY e {{
  p = f32[$0] parameter(0)
  ROOT n = f32[$0] negate(p)
}})", 4);
  auto fmt = absl::StrFormat(R"(ENTRY e {{ ROOT c = s32[] constant(%d) }})", 1);
  auto check = R"(
// CHECK: [[X:%.*]] = f32[4] negate
ENTRY e {{ ROOT c = s32[] constant(1) }})";
  const char* not_hlo = R"(just some text)";
}}
'''


def test_raw_strings_that_are_modules() -> None:
    found = xt.modules_of("xla/tests/a_test.cc", SOURCE)
    assert [m.strip() for m in found] == [MODULE, MODULE.replace("negate", "abs")]


def test_hlo_files_are_taken_whole() -> None:
    assert xt.modules_of("xla/tools/data/add.hlo", MODULE) == [MODULE]
    assert xt.modules_of("xla/tools/data/notes.txt", "no module here") == []


def test_extract_from_a_git_tree(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "xla" / "tests").mkdir(parents=True)
    (repo / "xla" / "tests" / "a_test.cc").write_text(SOURCE)
    (repo / "xla" / "tests" / "b_test.cc").write_text(SOURCE)   # the same modules again
    (repo / "xla" / "other.cc").write_text(SOURCE)              # not included
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "x"], check=True)
    out = tmp_path / "out"
    counts = xt.extract(repo / ".git", out, xt.DEFAULT_INCLUDE, None)
    assert counts == {"files": 2, "raw": 4, "written": 2, "duplicates": 2}
    assert sorted(p.name for p in out.iterdir()) == ["xla_tests_a_test_0.hlo", "xla_tests_a_test_1.hlo"]
