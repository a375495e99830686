"""The README's "Using it" program runs as printed, unchanged, on the neuron device (PJRT_DEVICE=NEURON
for torch_xla; JAX with the plugin), from a fresh folder that sees the repository's examples."""
from __future__ import annotations

import re
from pathlib import Path

from tests.sdk.subproc import ROOT, check, run_python


def using_it_program() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Using it"):]
    section = section[:section.index("\n## ")]
    blocks = re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)
    assert len(blocks) == 1, "the section should hold one program"
    return blocks[0]


def test_the_readme_program_runs_unchanged_on_the_neuron_device(tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    program = using_it_program() + (
        "\nassert float((out.cpu() - torch.from_numpy(a * a * 2 * a)).abs().max()) == 0"
        "\ny = jax.jit(lambda x: x * x * add_kernel[2, 2](x, x))(a)"
        "\nassert 'Neuron' in repr(y.devices()) and float(abs(np.asarray(y) - a * a * 2 * a).max()) == 0"
        "\nprint('README OK')\n")
    (tmp_path / "readme.py").write_text(program)
    out = check(run_python(["readme.py"], cwd=tmp_path, env={"PJRT_DEVICE": "NEURON"}, drop=("JAX_PLATFORMS",),
                           timeout=600))
    assert "README OK" in out
