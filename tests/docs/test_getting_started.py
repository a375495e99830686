"""docs/getting-started.md runs as written: each of its files (marked `<!-- file: NAME -->` before
the code block) is written to a fresh folder and each Python program there runs in a fresh
interpreter on the `neuron` device (PJRT_DEVICE=NEURON for torch_xla; JAX with the plugin, not
the suite's JAX_PLATFORMS=cpu), with the SDK's import names, as a user would run it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.sdk.subproc import ROOT, check, run_python

GUIDE = ROOT / "docs" / "getting-started.md"
_FILE = re.compile(r"<!-- file: (\S+) -->\n```\w*\n(.*?)^```", re.S | re.M)


def guide_files() -> dict[str, str]:
    """The guide's files by name, in order."""
    files = dict(_FILE.findall(GUIDE.read_text()))
    assert files, "the guide marks no files"
    return files


def test_the_guide_marks_every_code_block_it_means_to_run() -> None:
    text = GUIDE.read_text()
    blocks = re.findall(r"^```(\w+)\n", text, re.M)
    assert len(blocks) == len(guide_files()) == 6  # an unmarked block would go untested


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("getting-started")
    for name, body in guide_files().items():
        (d / name).write_text(body)
    return d


@pytest.mark.parametrize("program", ["cpp_torch.py", "nki_torch.py", "nki_jax.py", "cpp_jax.py"])
def test_each_program_of_the_guide_runs_on_the_neuron_device(program: str, workdir: Path) -> None:
    env = {"PJRT_DEVICE": "NEURON"}
    out = check(run_python([program], cwd=workdir, env=env, drop=("JAX_PLATFORMS",), timeout=600))
    if program.endswith("_jax.py"):
        assert "neuron" in out.split("]")[0].lower()  # the result's devices: not JAX's CPU
    assert "nan" not in out.lower()
