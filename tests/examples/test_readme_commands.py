"""The README's command-line lines work on a fresh clone: they name files the repository ships, and
the example graph compiles and runs with the same answer as XLA:CPU."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np

import hlo
from neuron_customcall import cli
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable

ROOT = Path(__file__).resolve().parents[2]
GRAPH = ROOT / "examples" / "hlo" / "jit_train_step.hlo.txt"


def _readme_cli_lines() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    lines = re.findall(r"^\.venv/bin/neuron-customcall (.+?)(?:\s+#.*)?$", text, flags=re.M)
    return [shlex.split(line) for line in lines]


def test_readme_names_only_files_the_clone_has():
    for args in _readme_cli_lines():
        for a in args:
            if "/" in a and not a.startswith("-") and Path(a).suffix in (".txt", ".pb", ".pbtxt"):
                assert (ROOT / a).is_file(), f"the README names {a}, which the repository does not ship"


def test_readme_hlo_compile_inspect_sequence(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    quick_start = [a for a in _readme_cli_lines() if any("examples/hlo" in x or x == "step.neff" for x in a)]
    assert len(quick_start) == 3
    for args in quick_start:
        args = [str(ROOT / a) if (ROOT / a).is_file() else a for a in args]
        assert cli.main(args) == 0, args
    assert (tmp_path / "step.neff").is_file()


def test_example_graph_matches_xla_cpu(tmp_path):
    from emulator import load_artifact
    from neuron_customcall.compiler import compile_module

    module = hlo.load(GRAPH)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(p.shape.dimensions).astype(np.float32) * 0.1 for p in module.entry.parameters]
    ours = load_artifact(compile_module(module)).run(inputs)
    ref = XlaCpuExecutable(module.to_bytes()).run(inputs)
    for o, r in zip(ours, ref):
        np.testing.assert_allclose(o, r, rtol=2e-5, atol=2e-6)
