"""Builds the plugin's shared library (libneuronpjrt.so) from native/ with the system g++.

Why built here and not shipped: the project ships no binaries. The install (scripts/bootstrap.sh)
runs `python -m neuron_customcall.pjrt.build`; `library_path()` also builds on first use when the
library is missing or older than its sources (a stamp holds the hash of the sources, flags and
Python version), so a fresh clone and an edited source both work. The build is atomic (a temporary
file, then os.replace), so processes building at once race harmlessly.
"""
from __future__ import annotations

import argparse
import hashlib
import logging
import os
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

NATIVE = Path(__file__).resolve().parent / "native"
SOURCES = ("neuron_pjrt.cc", "pjrt_abi.h")
LIBRARY_NAME = "libneuronpjrt.so"
CXXFLAGS = ["-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-Wall", "-Wextra",
            "-Wno-missing-field-initializers", "-Wno-unused-parameter", "-Wno-cast-function-type"]


class PluginBuildError(RuntimeError):
    """The plugin library could not be built (no g++, a compile error)."""


def _python_flags() -> tuple[list[str], list[str]]:
    include = sysconfig.get_paths()["include"]
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    ldlib = sysconfig.get_config_var("LDLIBRARY") or ""
    link: list[str] = []
    if sysconfig.get_config_var("Py_ENABLE_SHARED") and ldlib.startswith("lib") and ".so" in ldlib:
        # Linked against libpython (already loaded in the process) so its symbols resolve however
        # the framework dlopens the plugin.
        link = [f"-L{libdir}", f"-Wl,-rpath,{libdir}", "-l" + ldlib[3:ldlib.index(".so")]]
    return [f"-I{include}"], link


def _digest() -> str:
    h = hashlib.sha256()
    for name in SOURCES:
        h.update(name.encode() + b"\0" + (NATIVE / name).read_bytes())
    inc, link = _python_flags()
    h.update(repr((CXXFLAGS, inc, link, sysconfig.get_python_version())).encode())
    return h.hexdigest()


def _output_dir() -> Path:
    """The package's lib/ directory, or a user cache when the package is not writable."""
    here = Path(__file__).resolve().parent / "lib"
    try:
        here.mkdir(exist_ok=True)
        if os.access(here, os.W_OK):
            return here
    except OSError:
        pass
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "neuron-customcall" / "pjrt"
    base.mkdir(parents=True, exist_ok=True)
    return base


def _up_to_date(lib: Path, stamp: Path, digest: str) -> bool:
    return lib.exists() and stamp.exists() and stamp.read_text().strip() == digest


def build(force: bool = False) -> Path:
    """The path of the built library, building it if needed."""
    out = _output_dir()
    lib, stamp = out / LIBRARY_NAME, out / (LIBRARY_NAME + ".stamp")
    digest = _digest()
    if not force and _up_to_date(lib, stamp, digest):
        return lib
    cxx = os.environ.get("CXX") or shutil.which("g++")
    if not cxx:
        raise PluginBuildError("building the neuron PJRT plugin needs g++ (set CXX to another C++17 compiler)")
    inc, link = _python_flags()
    fd, tmp = tempfile.mkstemp(prefix=".libneuronpjrt-", suffix=".so", dir=out)
    os.close(fd)
    cmd = [cxx, *CXXFLAGS, *inc, str(NATIVE / "neuron_pjrt.cc"), "-o", tmp, *link]
    log.info("building the neuron PJRT plugin: %s", " ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        os.unlink(tmp)
        raise PluginBuildError(f"g++ failed building {LIBRARY_NAME} ({proc.returncode}):\n{proc.stderr[-4000:]}")
    os.replace(tmp, lib)
    stamp_tmp = stamp.with_suffix(f".{os.getpid()}.tmp")
    stamp_tmp.write_text(digest + "\n")
    os.replace(stamp_tmp, stamp)
    return lib


def library_path() -> str:
    """Where the plugin library is (built first if missing or stale)."""
    return str(build())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the neuron PJRT plugin library (libneuronpjrt.so).")
    parser.add_argument("--force", action="store_true", help="rebuild even when up to date")
    args = parser.parse_args(argv)
    print(build(force=args.force))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
