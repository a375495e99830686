"""Example 4: the neuron-relu wheel builds, carries its C++ library and dependencies, installs into
a fresh virtual environment, and its op works there (forward, gradient, torch.compile)."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_op_wheel"


def test_wheel_builds_installs_and_runs_in_a_fresh_venv(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(EXAMPLE / "build_and_try.py"), "--workdir", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    venv_site = tmp_path / "venv" / "lib"
    package_line = next(line for line in done.stdout.splitlines() if line.startswith("package "))
    assert str(venv_site) in package_line  # imported from the new environment, not the source tree
    assert "neuron-relu works from the installed wheel" in done.stdout

    (wheel,) = (tmp_path / "dist").glob("*.whl")
    assert wheel.name.endswith("-cp311-cp311-linux_x86_64.whl")  # native code: a platform wheel
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read("neuron_relu-0.1.0.dist-info/METADATA").decode()
    assert {"neuron_relu/__init__.py", "neuron_relu/libneuron_relu.so"} <= names
    assert "Requires-Dist: neuron-customcall" in metadata and "Requires-Dist: torch" in metadata
    # The build ran on a copy: the example's directory holds no build products.
    assert not any((EXAMPLE / name).exists() for name in ("build", "dist", "neuron_relu.egg-info"))
    assert not list((EXAMPLE / "neuron_relu").glob("*.so"))
