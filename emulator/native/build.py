"""Building, caching, verifying and loading modules of fused regions.

Trust rule (docs/trust.md): a module is built by this code with the system g++ from source this
package generated (emulator.native.csource), into a directory private to the user (mode 0700,
owner checked: emulator.gpsimd.store.private_directory). It is loaded only if its bytes hash to
the digest recorded when it was built, and the bytes hashed are the bytes loaded (read through one
descriptor that dlopen then opens as /proc/self/fd/N), so a file swapped after the check never
runs. Nothing is loaded that this code did not build.

A module is keyed by the SHA-256 of its source, the compiler's identity, the flags, Python's and
NumPy's versions: a cache hit in another process loads at once (~1 ms), a miss runs g++ (~1 s).
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from pathlib import Path
from types import ModuleType

import numpy as np

from emulator.gpsimd.store import private_base, private_directory, read_regular

log = logging.getLogger(__name__)

#: exact IEEE arithmetic: no contraction into FMAs, no fast-math; baseline x86-64 vectors only
#: (the cache may be shared by machines of one user)
CXXFLAGS = ("-std=c++17", "-O3", "-fPIC", "-shared", "-ffp-contract=off", "-fno-fast-math", "-fno-math-errno",
            "-fvisibility=hidden", "-w")
#: a g++ that takes longer than this for one module is given up (the program stays on NumPy)
BUILD_TIMEOUT = 120.0


class NativeBuildError(RuntimeError):
    """A module could not be built or loaded; the program keeps running on NumPy."""


_lock = threading.Lock()
_loaded: dict[str, ModuleType] = {}
_pinned: list[int] = []  # descriptors of the loaded modules' files (see _load_verified)
_identity: list[str] = []


def compiler() -> str:
    cxx = os.environ.get("CXX") or shutil.which("g++")
    if not cxx:
        raise NativeBuildError("no g++ on PATH (set CXX to a C++17 compiler)")
    return cxx


def _compiler_identity(cxx: str) -> str:
    if not _identity:
        try:
            proc = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise NativeBuildError(f"{cxx} --version failed: {e}") from None
        _identity.append(f"{cxx}\0{proc.stdout}")
    return _identity[0]


def _includes() -> list[str]:
    return [f"-I{sysconfig.get_paths()['include']}", f"-I{np.get_include()}"]


def module_key(source: str) -> str:
    """The cache key of a module: its source, the compiler, the flags, Python and NumPy."""
    cxx = compiler()
    parts = [source, _compiler_identity(cxx), *CXXFLAGS, *_includes(), sys.version, np.__version__]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


#: temporaries older than this are a build that was cut short (a process that exited during it)
STALE_SECONDS = 3600.0


def cache_directory() -> Path:
    """``<private base>/fused`` (NEURON_CUSTOMCALL_PRIVATE_DIR moves the base), its stale
    temporaries removed."""
    try:
        directory = private_directory(private_base() / "fused")
    except Exception as e:  # noqa: BLE001 - a LibraryError names the directory's problem
        raise NativeBuildError(str(e)) from None
    now = time.time()
    for tmp in directory.glob(".tmp-*"):
        try:
            if now - tmp.lstat().st_mtime > STALE_SECONDS:
                tmp.unlink()
        except OSError:
            continue
    return directory


def _write_atomic(directory: Path, name: str, data: bytes) -> Path:
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)  # O_EXCL, mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, directory / name)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return directory / name


def _build(directory: Path, key: str, source: str) -> None:
    """Runs g++ on `source`; stores the library as <key>.so and its SHA-256 as <key>.sha256."""
    cxx = compiler()
    src_fd, src = tempfile.mkstemp(prefix=".tmp-", suffix=".cc", dir=directory)
    lib_fd, lib = tempfile.mkstemp(prefix=".tmp-", suffix=".so", dir=directory)
    os.close(lib_fd)
    try:
        with os.fdopen(src_fd, "w") as f:
            f.write(source)
        cmd = [cxx, *CXXFLAGS, *_includes(), src, "-o", lib]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise NativeBuildError(f"g++ did not run: {e}") from None
        if proc.returncode != 0:
            raise NativeBuildError(f"g++ failed ({proc.returncode}): {proc.stderr[-2000:]}")
        image = read_regular(Path(lib))
        _write_atomic(directory, f"{key}.so", image)
        _write_atomic(directory, f"{key}.sha256", hashlib.sha256(image).hexdigest().encode())
    finally:
        Path(src).unlink(missing_ok=True)
        Path(lib).unlink(missing_ok=True)


def _load_verified(directory: Path, key: str, name: str) -> ModuleType | None:
    """The module stored under `key` if its bytes hash to the recorded digest; None when there is
    none (or a stale or altered one, which is then rebuilt)."""
    try:
        expected = read_regular(directory / f"{key}.sha256", limit=128).decode().strip()
        fd = os.open(directory / f"{key}.so", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (OSError, UnicodeDecodeError):
        return None
    except Exception as e:  # noqa: BLE001 - read_regular's refusal (not a regular file...)
        log.warning("fused native module %s refused: %s", key, e)
        return None
    loaded = False
    try:
        with os.fdopen(os.dup(fd), "rb") as f:
            image = f.read()
        actual = hashlib.sha256(image).hexdigest()
        if actual != expected:
            log.warning("fused native module %s.so does not hash to its recorded digest (%s, recorded %s): "
                        "not loaded, rebuilt", key, actual, expected)
            return None
        path = f"/proc/self/fd/{fd}"
        loader = importlib.machinery.ExtensionFileLoader(name, path)
        spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        if spec is None:
            raise NativeBuildError("no import spec for the module")
        module = importlib.util.module_from_spec(spec)
        loaded = True
    except ImportError as e:
        raise NativeBuildError(f"the module did not load: {e}") from None
    finally:
        # The descriptor of a loaded module stays open: dlopen knows a library by the path it
        # was given, and a later module opened as the same /proc/self/fd/N would be taken for it.
        if loaded:
            _pinned.append(fd)
        else:
            os.close(fd)
    return module


def load_module(name: str, source: str) -> ModuleType:
    """The extension module `name` of `source`: loaded once per process, from the cache or
    built."""
    key = module_key(source)
    with _lock:
        module = _loaded.get(key)
        if module is not None:
            return module
    directory = cache_directory()
    module = _load_verified(directory, key, name)
    if module is None:
        _build(directory, key, source)
        module = _load_verified(directory, key, name)
        if module is None:
            raise NativeBuildError("the module built does not verify")
    with _lock:
        return _loaded.setdefault(key, module)
