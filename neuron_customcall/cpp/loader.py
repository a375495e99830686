"""Loading built libraries: the library's runner from the engine's one registry (its isolated
worker loads the library and runs its shape and compute functions) and one HostLibrary
(registration table, cached shape calls through that worker) per NEURON_LIBRARY name,
framework-neutral. The host process never loads a user's library itself.

The runner keeps a hash-checked copy of the file in the private library store, so that a
library rebuilt under the same name is new content (a new runner, whose worker loads the new
code) while the copy an earlier load used stays as it was; a reload evicts the old runner.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from emulator.gpsimd import GpSimdRunner, HostLibrary, LibraryDescriptor
from emulator.gpsimd.errors import unknown_name
from emulator.gpsimd.runner import RunResult, evict, runner_for

log = logging.getLogger(__name__)


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


def load(path: str | os.PathLike[str],
         check: Callable[[LibraryDescriptor], None] | None = None) -> LoadedLibrary:
    """Loads (or reloads) a built library; the previous one of the same NEURON_LIBRARY name is
    replaced, and its worker stopped. `check(descriptor)` may refuse the library (by raising)
    before it replaces anything."""
    source = Path(path).resolve()
    if not source.is_file():
        raise FileNotFoundError(f"no such custom-op library: {source}")
    runner = runner_for(source, label=str(source))
    with _LOCK:
        same = next((lib for lib in _LOADED.values() if lib.runner is runner), None)
    if same is not None:
        if check is not None:
            check(same.descriptor)
        return same
    try:
        host = HostLibrary(runner.library_path, runner)
        if check is not None:
            check(host.descriptor)
    except BaseException:
        evict(runner)
        raise
    name = host.descriptor.library
    with _LOCK:
        previous = _LOADED.get(name)
        loaded = LoadedLibrary(source, host, runner)
        _LOADED[name] = loaded
    if previous is not None and previous.runner is not runner:
        evict(previous.runner)
    log.info("loaded custom-op library '%s' (%d ops) from %s", name, len(host.descriptor.ops), source)
    return loaded


def get(name: str) -> LoadedLibrary:
    """The library currently loaded under a NEURON_LIBRARY name.

    Read without the lock (a dict read is atomic under the GIL; the lock orders the writers):
    every custom-call of a C++ op on an XLA tensor asks, four times a training step."""
    loaded = _LOADED.get(name)
    if loaded is None:
        with _LOCK:
            raise unknown_name("custom-op library", name, list(_LOADED), " is loaded (custom_op.load or load_library)")
    return loaded
