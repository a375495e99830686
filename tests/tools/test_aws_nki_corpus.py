"""tools/aws_nki_corpus.py on a throwaway repository shaped like AWS's: which files are programs,
how a program's output is classed, and the report written from a whole run."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tools import aws_nki_corpus as corpus

FILES = {
    "nki/test/test_small.py": "def test_ok():\n    assert 1 + 1 == 2\n\n"
                              "def test_bad():\n    assert 1 + 1 == 3\n",
    "nki/examples/kernels.py": '"""only definitions"""\nimport os\n\ndef k():\n    return 1\n',
    "nki/examples/good.py": "from kernels import k\nif __name__ == '__main__':\n"
                            "    print('NKI and NumPy match' if k() == 1 else 'differ')\n",
    "nki/examples/wrong.py": "print('NKI and NumPy differ')\n",
    "nki/examples/crash.py": "raise SystemExit('kernel refused')\n",
    "nki/deep-dives/src/x/top.py": "print('np.allclose pass?', False)\n",
    "nki/api/nki/__init__.py": "raise RuntimeError('not a program')\n",
}


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "sdk"
    for name, text in FILES.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "x"]):
        subprocess.run(git + args, check=True)
    return repo / ".git"


def test_programs_are_files_that_do_something_when_run() -> None:
    assert not corpus.is_program(FILES["nki/examples/kernels.py"])
    assert corpus.is_program(FILES["nki/examples/good.py"])
    assert corpus.is_program("print(1)\n") and corpus.is_program("def f(:\n")  # errors shown


def test_a_whole_run_classes_every_test_and_program(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert corpus.main([str(_repo(tmp_path)), str(out), "--timeout", "300"]) == 0
    rows = {r["name"]: r for r in json.loads((out / "report.json").read_text())}
    got = {name: r["outcome"] for name, r in rows.items()}
    assert got == {"test_small::test_ok": "passed", "test_small::test_bad": "failed",
                   "nki/examples/good.py": "passed", "nki/examples/wrong.py": "differs",
                   "nki/examples/crash.py": "failed",
                   "nki/deep-dives/src/x/top.py": "differs"}, got
    assert rows["nki/examples/crash.py"]["detail"] == "kernel refused"
    assert "failed: 2" in (out / "report.md").read_text()
