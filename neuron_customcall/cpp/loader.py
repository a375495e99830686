"""Loading built libraries: one runner (the library's isolated worker, which loads the library
and runs its shape and compute functions) and one HostLibrary (registration table, cached shape
calls through that worker) per library, framework-neutral. The host process never loads a
user's library itself.

The library file is first copied to a content-addressed path, so that a library rebuilt under
the same name is a new file (its worker loads the new code) while the file an earlier load used
stays as it was.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from emulator.gpsimd import GpSimdRunner, HostLibrary, LibraryDescriptor
from emulator.gpsimd.library import materialise
from emulator.gpsimd.runner import RunResult

log = logging.getLogger(__name__)

_CACHE = Path(tempfile.gettempdir()) / "neuron_customcall_gpsimd"


@dataclass
class LoadedLibrary:
    """A library loaded in this process: its file, host side and runner."""

    source_path: Path
    host: HostLibrary
    runner: GpSimdRunner
    last_runs: dict[str, RunResult] = field(default_factory=dict)

    @property
    def descriptor(self) -> LibraryDescriptor:
        return self.host.descriptor


_LOADED: dict[str, LoadedLibrary] = {}
_LOCK = threading.Lock()


def load(path: str | os.PathLike[str]) -> LoadedLibrary:
    """Loads (or reloads) a built library; the previous one of the same NEURON_LIBRARY name is
    replaced, and its worker stopped."""
    source = Path(path).resolve()
    if not source.is_file():
        raise FileNotFoundError(f"no such custom-op library: {source}")
    content_path = materialise(source.read_bytes(), _CACHE).resolve()
    with _LOCK:
        same = next((lib for lib in _LOADED.values() if lib.host.path == content_path), None)
    if same is not None:
        return same
    runner = GpSimdRunner(content_path, label=str(source))
    try:
        host = HostLibrary(content_path, runner)
    except BaseException:
        runner.close()
        raise
    name = host.descriptor.library
    with _LOCK:
        previous = _LOADED.get(name)
        loaded = LoadedLibrary(source, host, runner)
        _LOADED[name] = loaded
    if previous is not None:
        previous.runner.close()
    log.info("loaded custom-op library '%s' (%d ops) from %s", name, len(host.descriptor.ops), source)
    return loaded


def get(name: str) -> LoadedLibrary:
    """The library currently loaded under a NEURON_LIBRARY name."""
    with _LOCK:
        if name not in _LOADED:
            raise KeyError(f"no custom-op library '{name}' is loaded")
        return _LOADED[name]
