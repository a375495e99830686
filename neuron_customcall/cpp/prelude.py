"""The precompiled prelude: the device runtime's headers compiled once per compiler and flags
into a shared cache, then force-included (-include) into every custom-op source.

A GCC precompiled header is only valid for the flags it was built with, so its key holds the
compiler, the flags and the content of every runtime header; GCC ignores an unusable one and
parses the headers instead (-Winvalid-pch says so when verbose). The key also holds the runtime
headers' directory: a .gch records the paths it was built from, and diagnostics in the headers
(a wrong argument to a torch:: function) name those paths, so two checkouts with the same
headers sharing one cache must not share a prelude (the other's paths may not even exist).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

from emulator.gpsimd.sources import INCLUDE_DIR, PRELUDE_HEADER, header_files
from neuron_customcall.cpp import cache
from neuron_customcall.cpp.compiler import Toolchain

PRELUDE_NAME = PRELUDE_HEADER.name


def key(flags: tuple[str, ...], identity: str, include_dir: Path = INCLUDE_DIR) -> str:
    parts = [identity, str(Path(include_dir).resolve()), *flags] + [
        cache.digest(p.read_bytes()) for p in header_files()]
    return cache.digest("\0".join(parts).encode())


KEEP = 8  # precompiled preludes kept (about 40 MB each)
STALE_SECONDS = 3600.0  # only preludes unused this long are removed: no build still uses them


def _prune(pch_root: Path) -> None:
    """Removes the least recently used preludes beyond KEEP (flags and runtime versions change)."""
    ages = []
    for entry in pch_root.iterdir():
        try:
            ages.append((time.time() - entry.stat().st_mtime, entry))
        except FileNotFoundError:  # pruned by a concurrent build
            continue
    for age, stale in sorted(ages)[KEEP:]:
        if age > STALE_SECONDS:
            shutil.rmtree(stale, ignore_errors=True)


def directory_for(toolchain: Toolchain, identity: str, root: Path) -> Path:
    """Where `ensure` keeps the prelude and its .gch for these flags."""
    return root / "pch" / key(toolchain.flags, identity)[:32]


def is_built(toolchain: Toolchain, identity: str, root: Path) -> bool:
    """Whether `ensure` will find the .gch for these flags (a build's progress counts it)."""
    return (directory_for(toolchain, identity, root) / f"{PRELUDE_NAME}.gch").exists()


def ensure(toolchain: Toolchain, identity: str, root: Path) -> Path:
    """The directory holding the prelude and its .gch for these flags, built if missing."""
    directory = directory_for(toolchain, identity, root)
    gch = directory / f"{PRELUDE_NAME}.gch"
    if gch.exists():
        os.utime(directory)  # recently used
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    suffix = f".{os.getpid()}.{threading.get_ident()}.tmp"
    header = directory / PRELUDE_NAME
    if not header.exists():
        shutil.copyfile(PRELUDE_HEADER, header.with_name(header.name + suffix))
        os.replace(header.with_name(header.name + suffix), header)
    tmp = gch.with_name(gch.name + suffix)
    toolchain.precompile(header, tmp)
    os.replace(tmp, gch)
    _prune(directory.parent)
    return directory


def flags(directory: Path) -> tuple[str, ...]:
    """Flags that make a source use the prelude in `directory`."""
    return ("-Winvalid-pch", "-I", str(directory), "-include", PRELUDE_NAME)
