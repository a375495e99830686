"""Builds the neuron-relu wheel, installs it in a fresh virtual environment and checks the op there.

    python examples/custom_op_wheel/build_and_try.py [--workdir DIR] [--keep]

1. ``pip wheel --no-build-isolation`` on a copy of this project (the source tree stays clean):
   setup.py's build_ext compiles csrc/ with neuron-customcall's builder into the wheel. (When
   this environment's setuptools is older than the project needs, as in a new Python 3.11 venv,
   the build runs in an environment layered on this one with a newer setuptools from the index.)
2. A new virtual environment without pip. It sees this environment's packages (torch, jax,
   neuron-customcall: gigabytes that are not downloaded again) through a ``.pth`` file that adds
   this environment's site-packages after its own (or ``--system-site-packages`` when this
   interpreter is not itself in a virtual environment).
3. ``pip install --no-deps --no-index`` of the wheel into it.
4. check.py under the new interpreter, from the work directory with ``-P`` (no script directory
   on sys.path), so that neuron_relu can only come from the new environment's site-packages.
"""
from __future__ import annotations

import argparse
import os
import shutil
import site
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parent
CHECK = PROJECT / "check.py"
PROJECT_FILES = ("pyproject.toml", "setup.py", "MANIFEST.in", "csrc", "neuron_relu")
#: pyproject.toml's build backend: PEP 639 license text needs setuptools 77 (bdist_wheel is built
#: in since 70.1). A Python 3.11 venv starts with setuptools 65 and no `wheel` package.
MIN_SETUPTOOLS = 77


def run(cmd: list[str], **kwargs: Any) -> None:
    """Runs a command; its output is shown only when it fails."""
    done = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if done.returncode:
        raise SystemExit(f"command failed ({done.returncode}): {' '.join(cmd)}\n{done.stdout}\n{done.stderr}")


def setuptools_major() -> int:
    from importlib import metadata

    try:
        return int(metadata.version("setuptools").split(".")[0])
    except (metadata.PackageNotFoundError, ValueError):
        return 0


def build_python(work: Path) -> Path:
    """The interpreter that builds the wheel: this one when its setuptools is new enough; else a
    build environment on top of this one with a newer setuptools from the package index (what
    pip's build isolation would fetch too; isolation itself can not be used, since
    neuron-customcall, the other build requirement, is installed here and not on an index)."""
    if setuptools_major() >= MIN_SETUPTOOLS:
        return Path(sys.executable)
    python = make_venv(work / "build-env")
    # --ignore-installed: the old setuptools belongs to the parent environment; leave it there.
    run([str(python), "-m", "pip", "install", "--quiet", "--ignore-installed", f"setuptools>={MIN_SETUPTOOLS}"])
    return python


def build_wheel(work: Path) -> Path:
    """Builds the wheel from a copy of the project (setuptools writes build/ and *.egg-info)."""
    source = work / "src"
    for name in PROJECT_FILES:
        src = PROJECT / name
        if src.is_dir():
            shutil.copytree(src, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
        else:
            source.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, source / name)
    dist = work / "dist"
    run([str(build_python(work)), "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--wheel-dir", str(dist), str(source)])
    (wheel,) = dist.glob("neuron_relu-*.whl")
    return wheel


def in_virtualenv() -> bool:
    return sys.prefix != sys.base_prefix


def make_venv(path: Path) -> Path:
    """A fresh environment that reuses this one's installed packages; returns its python."""
    venv.EnvBuilder(with_pip=False, system_site_packages=not in_virtualenv(), symlinks=True).create(path)
    python = path / "bin" / "python"
    if in_virtualenv():
        purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        # `import` lines of a .pth run at start-up; addsitedir also runs the parent's own .pth
        # files (editable installs such as neuron-customcall's), and appends after our own.
        lines = [f"import site; site.addsitedir({p!r})" for p in site.getsitepackages()]
        Path(purelib, "_parent_environment.pth").write_text("\n".join(lines) + "\n")
    return python


def install(python: Path, wheel: Path) -> None:
    """pip (the parent environment's, seen through the .pth) installs into the new prefix."""
    run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", str(wheel)])


def try_it(python: Path, work: Path) -> int:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run([str(python), "-P", str(CHECK)], cwd=work, env=env).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, help="where to build and create the environment "
                        "(default: a temporary directory, removed afterwards)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="neuron-relu-wheel-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        start = time.perf_counter()
        wheel = build_wheel(work)
        print(f"[1/4] built {wheel.name} ({wheel.stat().st_size // 1024} KB) in {time.perf_counter() - start:.1f} s")
        start = time.perf_counter()
        python = make_venv(work / "venv")
        print(f"[2/4] created the environment {work / 'venv'} in {time.perf_counter() - start:.1f} s")
        start = time.perf_counter()
        install(python, wheel)
        print(f"[3/4] installed the wheel with pip --no-deps --no-index in {time.perf_counter() - start:.1f} s")
        start = time.perf_counter()
        print("[4/4] check.py in the new environment:", flush=True)
        code = try_it(python, work)
        print(f"      ({time.perf_counter() - start:.1f} s)")
        return code
    finally:
        if args.workdir is None and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        elif args.workdir is None:
            print(f"kept {work}")


if __name__ == "__main__":
    sys.exit(main())
