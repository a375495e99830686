"""Running a program in a fresh interpreter with the SDK's import names on the path.

The SDK names (sdk/) are a separate distribution that scripts/bootstrap.sh installs; a test runs
against this checkout's copy (the repository root and sdk/ first on PYTHONPATH), as the rest of the
suite runs against the checkout. The frameworks find device plugins through entry points, which
come from installed metadata; so that a test sees this checkout's declarations (pyproject.toml)
even in an environment installed from an older one, a metadata directory holding them is put on
the path too. A fresh process also gives each program the device it asks for: torch_xla fixes its
device at the first use, and the suite's own process runs PJRT_DEVICE=CPU."""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "sdk"
#: Programs written as the SDK's documents print them, run from this folder.
PROGRAMS = Path(__file__).resolve().parent / "programs"


@lru_cache(maxsize=1)
def entry_points_dir() -> Path:
    """A directory holding a dist-info with this checkout's entry points (pyproject.toml)."""
    groups = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"].get("entry-points", {})
    base = Path(tempfile.mkdtemp(prefix="neuron-customcall-entry-points-"))
    atexit.register(shutil.rmtree, base, ignore_errors=True)  # one per test process, gone with it
    info = base / "neuron_customcall_checkout-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: neuron-customcall-checkout\nVersion: 0\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in points.items()) + "\n"
        for group, points in groups.items()))
    return base


def run_python(args: list[str], *, cwd: Path | None = None, timeout: float = 900,
               env: dict[str, str] | None = None, drop: tuple[str, ...] = (),
               path: tuple[Path, ...] = ()) -> subprocess.CompletedProcess:
    """Runs ``python *args``; ``env`` entries are added to (``drop`` names removed from) ours,
    ``path`` directories go first on PYTHONPATH."""
    full = {k: v for k, v in os.environ.items() if k not in drop}
    entries = [*map(str, path), str(ROOT), str(SDK), str(entry_points_dir()), os.environ.get("PYTHONPATH")]
    full["PYTHONPATH"] = os.pathsep.join(filter(None, entries))
    full.update(env or {})
    return subprocess.run([sys.executable, *args], cwd=cwd or ROOT, env=full, capture_output=True,
                          text=True, timeout=timeout)


def check(done: subprocess.CompletedProcess) -> str:
    """The program's stdout; its output in the assertion message when it failed."""
    assert done.returncode == 0, f"exit {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    return done.stdout
