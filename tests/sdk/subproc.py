"""Running a program in a fresh interpreter with the SDK's import names on the path.

The SDK names (sdk/) are a separate distribution that scripts/bootstrap.sh installs; a test runs
against this checkout's copy (the repository root and sdk/ first on PYTHONPATH), as the rest of the
suite runs against the checkout. A fresh process also gives each program the device it asks for:
torch_xla fixes its device at the first use, and the suite's own process runs PJRT_DEVICE=CPU."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "sdk"
#: Programs written as the SDK's documents print them, run from this folder.
PROGRAMS = Path(__file__).resolve().parent / "programs"


def run_python(args: list[str], *, cwd: Path | None = None, timeout: float = 600,
               env: dict[str, str] | None = None, drop: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Runs ``python *args``; ``env`` entries are added to (``drop`` names removed from) ours."""
    full = {k: v for k, v in os.environ.items() if k not in drop}
    full["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(SDK), *filter(None, [os.environ.get("PYTHONPATH")])])
    full.update(env or {})
    return subprocess.run([sys.executable, *args], cwd=cwd or ROOT, env=full, capture_output=True,
                          text=True, timeout=timeout)


def check(done: subprocess.CompletedProcess) -> str:
    """The program's stdout; its output in the assertion message when it failed."""
    assert done.returncode == 0, f"exit {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    return done.stdout
