"""The emulator's layering rule (docs/DESIGN.md): loading and running artifacts imports neither
`hlo`, `neuron_customcall`, torch nor jax; `import emulator` alone stays light."""
from __future__ import annotations

import subprocess
import sys

_CHECK = """
import sys
import emulator
assert "numpy" not in sys.modules, "import emulator must stay light"
import emulator.artifact, emulator.program, emulator.executor, emulator.ops
from emulator import load_artifact, Executable, ArtifactError
bad = sorted(m for m in sys.modules if m.split(".")[0] in ("hlo", "neuron_customcall", "torch", "jax", "jaxlib",
                                                          "torch_xla"))
assert not bad, bad
"""


def test_emulator_imports_nothing_above_it():
    subprocess.run([sys.executable, "-c", _CHECK], check=True, cwd=".", timeout=120)
