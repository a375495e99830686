"""The compiler driver: the system C++ compiler with the GpSimd device runtime's flags.

Both shape and compute sources are compiled by the host compiler against the emulator's shipped
headers (no libtorch), so a build takes seconds. Commands are shown on stderr with verbose=True,
the way torch.utils.cpp_extension shows its own.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from emulator.gpsimd.sources import INCLUDE_DIR
from neuron_customcall.cpp.errors import BuildError

log = logging.getLogger(__name__)


BASE_FLAGS = (
    "-std=c++17",
    # -O3 vectorises the kernels' element loops, as the device's 512-bit vector unit would.
    "-O3",
    "-fPIC",
    "-pthread",
    # Each library keeps its own runtime state even when several are loaded in one process.
    "-fno-gnu-unique",
    "-fvisibility-inlines-hidden",
)
LINK_FLAGS = ("-shared", "-pthread", "-Wl,-Bsymbolic", "-Wl,--no-undefined")
# Tuning only (no effect on what a kernel computes), used where the compiler accepts it (GCC on
# x86). A loop through element-wise or stream accessors keeps a check per element, so GCC does not
# vectorise it, and its default x86 tuning then compiles a data-dependent select such as ReLU's
# `v > 0.0f ? v : 0.0f` as a branch, mispredicted on about half of random data (4 ns an element on a
# 4096x2048 ReLU, most of its time). A higher branch cost makes it emit the branchless select that
# the vectorised loop would have had, and that the device's vector unit computes.
TUNING_FLAGS = ("-mbranch-cost=5",)


@functools.lru_cache(maxsize=None)
def compiler() -> str:
    """The C++ compiler: $CXX, or g++ from PATH."""
    name = os.environ.get("CXX", "g++")
    path = shutil.which(name)
    if path is None:
        raise BuildError(f"no C++ compiler: '{name}' is not on PATH (set CXX)")
    return path


@functools.lru_cache(maxsize=None)
def compiler_identity() -> str:
    """Path and version of the compiler, part of every cache key."""
    version = subprocess.run([compiler(), "-dumpfullversion"], capture_output=True, text=True).stdout.strip()
    return f"{compiler()} {version}"


def accepts(compiler_path: str, flag: str) -> bool:
    """Whether the compiler takes `flag` (compiles an empty C++ file with it)."""
    proc = subprocess.run([compiler_path, flag, "-x", "c++", "-fsyntax-only", "-"], input="",
                          capture_output=True, text=True)
    return proc.returncode == 0


@functools.lru_cache(maxsize=None)
def tuning_flags() -> tuple[str, ...]:
    """The TUNING_FLAGS that this compiler accepts, for kernels' sources."""
    flags = tuple(flag for flag in TUNING_FLAGS if accepts(compiler(), flag))
    log.debug("tuning flags for %s: %s", compiler(), flags)
    return flags


@dataclass
class Toolchain:
    """Compiles and links with one set of flags; shows commands when verbose."""

    flags: tuple[str, ...]
    verbose: bool = False

    def _run(self, cmd: Sequence[str], what: str) -> None:
        line = " ".join(cmd)
        log.debug("%s", line)
        if self.verbose:
            sys.stderr.write(f"[neuron_customcall.cpp] {line}\n")
        proc = subprocess.run(list(cmd), capture_output=True, text=True)
        if self.verbose and proc.stderr and proc.returncode == 0:
            sys.stderr.write(proc.stderr)
        if proc.returncode != 0:
            raise BuildError(f"{what} failed:\n{proc.stderr.strip()}")

    def compile(self, source: Path, obj: Path, depfile: Path) -> None:
        cmd = [compiler(), *self.flags, "-I", str(INCLUDE_DIR), "-c", str(source), "-o", str(obj),
               "-MMD", "-MF", str(depfile)]
        self._run(cmd, f"compiling {source}")

    def syntax_check(self, source: Path, what: str) -> None:
        """Compiles `source` for its diagnostics only (-fsyntax-only)."""
        self._run([compiler(), *self.flags, "-I", str(INCLUDE_DIR), "-fsyntax-only", str(source)], what)

    def precompile(self, header: Path, gch: Path) -> None:
        cmd = [compiler(), *self.flags, "-I", str(INCLUDE_DIR), "-x", "c++-header", str(header), "-o", str(gch)]
        self._run(cmd, f"precompiling {header.name}")

    def link(self, objects: Sequence[Path], output: Path) -> None:
        tmp = output.with_name(f".{output.name}.{os.getpid()}.tmp")
        self._run([compiler(), *LINK_FLAGS, "-o", str(tmp), *map(str, objects)], f"linking {output.name}")
        os.replace(tmp, output)
