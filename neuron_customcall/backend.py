"""From an HLO module to a loaded emulator executable, through the compile cache and an in-process
memo.

Why a separate layer: every way in (jax.jit, torch_xla lazy tensors, torch.compile, the CLI) needs
the same thing, "an executable for this graph, as fast as possible". Three levels answer it:

1. the in-process memo, keyed by the raw bytes the framework handed over (a dictionary look-up;
   repeated calls of one graph cost microseconds), then by the canonical fingerprint; a caller
   may also file the result under its own identity of the graph (`alias`, `cached`);
2. the on-disk compile cache (neuron_customcall.cache), shared by processes;
3. the compiler.

A corrupt or unreadable cache entry is never fatal: it is reported, discarded and recompiled. So
is an entry that can not prove it belongs to its key: the key, HLO fingerprint and compiler
version recorded in its checksummed manifest must be this graph's (a valid artifact of another
graph copied into the slot would otherwise run in its place; docs/trust.md).
"""
from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, NamedTuple, Union

import hlo
from neuron_customcall import debug_dump
from neuron_customcall.cache import CacheConfigError, CompileCache, cache_key, default_cache_dir
from neuron_customcall.kernels import references

log = logging.getLogger(__name__)

GraphSource = Union["hlo.HloModule", bytes, bytearray, memoryview, str, os.PathLike]
CacheSetting = Union[bool, None, str, os.PathLike, CompileCache]

MEMO_SIZE = 256  # executables kept per process; a training loop uses a handful


class Compiled(NamedTuple):
    """A compiled graph: the artifact (its cache path when it is on disk, else its bytes) and the
    loaded executable."""

    artifact: Union[bytes, Path]
    executable: Any  # emulator executable: .manifest, .run(inputs)


def flags_key(flags: Any) -> str:
    """A canonical string for compile flags, so that equal flags give equal cache keys."""
    if flags is None:
        return ""
    to_json = getattr(flags, "to_json", None)
    if callable(to_json):
        doc = to_json()
    elif dataclasses.is_dataclass(flags):
        doc = dataclasses.asdict(flags)
    else:
        return repr(flags)
    return doc if isinstance(doc, str) else json.dumps(doc, sort_keys=True, default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    return repr(value)


def compiler_version() -> str:
    """The compiler's version string: part of every cache key."""
    from neuron_customcall import compiler

    for name in ("COMPILER_VERSION", "__version__", "VERSION"):
        value = getattr(compiler, name, None)
        if value:
            return str(value)
    from neuron_customcall import __version__

    return __version__


def _compile(module: hlo.HloModule, flags: Any, identity: GraphIdentity | None = None) -> bytes:
    from neuron_customcall.compiler import compile_module

    start = time.perf_counter()
    if identity is None:
        artifact = compile_module(module, flags)
    else:
        artifact = compile_module(module, flags, fingerprint=identity.fingerprint, cache_key=identity.key)
    log.info("compiled %s in %.1f ms (%d bytes)", module.name, (time.perf_counter() - start) * 1e3, len(artifact))
    return artifact


def _load(artifact: bytes | Path, identity: GraphIdentity | None = None) -> Any:
    """The executable of `artifact`; with `identity`, only if the artifact proves it is that
    graph's (ArtifactError otherwise, before anything of it is loaded)."""
    from emulator.artifact import ArtifactError, read_artifact, read_bytes
    from emulator.executor import Executable
    from emulator.native_policy import check_native

    art = read_artifact(read_bytes(artifact))
    if identity is not None:
        m = art.manifest
        recorded = (m.get("cache_key"), m["hlo_fingerprint"], m["compiler_version"])
        if recorded != identity:
            raise ArtifactError(f"the artifact belongs to another graph or compiler (key {str(recorded[0])[:16]}, "
                                f"fingerprint {recorded[1][:16]}, compiler {recorded[2]!r}; expected key "
                                f"{identity.key[:16]}, fingerprint {identity.fingerprint[:16]}, "
                                f"compiler {identity.compiler!r})")
    check_native(art.kernels, None)
    return Executable(art)


class GraphIdentity(NamedTuple):
    """What a cache entry must record to be accepted for a graph (in manifest order)."""

    key: str
    fingerprint: str
    compiler: str


def resolve_cache(setting: CacheSetting) -> CompileCache | None:
    """None: as the environment says; False: no cache; True: the default directory even if the
    environment disables it; a path or a CompileCache: that one."""
    if setting is False:
        return None
    if isinstance(setting, CompileCache):
        return setting
    try:
        if setting is None:
            return CompileCache.from_env()
        return CompileCache(default_cache_dir() if setting is True else Path(setting))
    except CacheConfigError as e:  # e.g. an s3:// URL meant for the real Neuron compiler
        _warn_once(f"{e}; compiling without a cache")
        return None


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning("%s", message)


class _Memo:
    """A bounded, thread-safe LRU map from keys to Compiled."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[tuple, Compiled] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple) -> Compiled | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
            return hit

    def put(self, key: tuple, value: Compiled) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_memo = _Memo(MEMO_SIZE)


def clear_memo() -> None:
    """Forgets every executable loaded in this process (tests use it to reach the disk cache)."""
    _memo.clear()


def _raw_bytes(source: GraphSource) -> bytes | None:
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    return None


_DEFAULT_FLAGS: list[tuple[Any, str]] = []  # the compiler's default flags and their key, once


def _flags_and_key(flags: Any) -> tuple[Any, str]:
    if flags is not None:
        return flags, flags_key(flags)
    if not _DEFAULT_FLAGS:  # the compiler's defaults: share cache entries with callers that spell them out
        from neuron_customcall.compiler import CompileFlags

        defaults = CompileFlags()
        _DEFAULT_FLAGS.append((defaults, flags_key(defaults)))
    return _DEFAULT_FLAGS[0]


def cached(alias: Hashable, flags: Any = None) -> Compiled | None:
    """What `compile_cached(..., alias=alias)` returned with these flags, while the memo holds it:
    a framework that knows its graph by an identity of its own (torch_xla's graph hash) gets the
    executable without producing and hashing the graph's bytes again."""
    return _memo.get(("alias", alias, _flags_and_key(flags)[1]))


def compile_cached(source: GraphSource, flags: Any = None, *, cache: CacheSetting = None,
                   alias: Hashable | None = None) -> Compiled:
    """The executable for `source` (an HloModule, or HLO in any form: bytes, text, a path).

    Looks in the in-process memo, then the compile cache, then compiles (and installs the result
    in the cache). `cache` as in `resolve_cache`; the memo is per process and answers whatever
    `cache` says (clear_memo() to reach the disk again). `alias`, the caller's own identity of
    this graph, makes `cached(alias, flags)` answer with the result. Raises the compiler's
    CompileError.
    """
    compiled = _compile_cached(source, flags, cache)
    if alias is not None:
        _memo.put(("alias", alias, _flags_and_key(flags)[1]), compiled)
    return compiled


def _compile_cached(source: GraphSource, flags: Any, cache: CacheSetting) -> Compiled:
    flags, fkey = _flags_and_key(flags)
    raw = _raw_bytes(source)
    raw_key = ("raw", hashlib.sha256(raw).digest(), fkey) if raw is not None else None
    if raw_key is not None and (hit := _memo.get(raw_key)) is not None:
        return hit
    if isinstance(source, hlo.HloModule):
        fingerprint, build = source.fingerprint(), lambda: source
        as_proto = source.to_proto
    else:
        # Fingerprint the decoded proto; the IR is built only if the compiler has to run (on a
        # cache hit building it would be most of the cost).
        proto, _ = hlo.read_module_proto(source)
        references.expand_proto(proto)  # kernel images named by hash: fingerprinted and dumped inline
        fingerprint, build = hlo.fingerprint(proto), lambda: hlo.load(proto)
        as_proto = lambda: proto  # noqa: E731
    version = compiler_version()
    key = cache_key(fingerprint, fkey, version)
    graph_key = ("graph", key)
    compiled = _memo.get(graph_key)
    if compiled is None:
        if debug_dump.enabled():
            debug_dump.dump(as_proto(), fingerprint)
        compiled = _compile_or_fetch(build, flags, GraphIdentity(key, fingerprint, version), resolve_cache(cache))
        _memo.put(graph_key, compiled)
    if raw_key is not None:
        _memo.put(raw_key, compiled)
    return compiled


def _recorded_memory(manifest: dict) -> int:
    """The peak-memory estimate a cached artifact recorded (bytes); ArtifactError when it has
    none (an entry from before the estimate was recorded: recompiled like any unusable entry)."""
    need = manifest.get("memory_estimate")
    if not isinstance(need, int) or isinstance(need, bool) or need < 0:
        from emulator.artifact import ArtifactError

        raise ArtifactError(f"no memory estimate recorded (memory_estimate={need!r})")
    return need


def _compile_or_fetch(build: Callable[[], hlo.HloModule], flags: Any, identity: GraphIdentity,
                      cache: CompileCache | None) -> Compiled:
    key = identity.key
    if cache is not None:
        entry = cache.get(key)
        if entry is not None:
            path, data = entry
            try:
                executable = _load(data, identity)
                need = _recorded_memory(executable.manifest)
            except Exception as e:  # any defect of the entry: corrupt bytes, old format, ...
                log.warning("compile cache entry %s is unusable (%s: %s); recompiling", path, type(e).__name__, e)
                cache.discard(key)
            else:
                # The budget holds on a hit too: NEURON_CUSTOMCALL_MEMORY_LIMIT may be lower now.
                from neuron_customcall.compiler import memory

                memory.check_estimate(need, f" (cached at {path})")
                log.info("Using a cached neff at %s", path)
                return Compiled(path, executable)
    artifact = _compile(build(), flags, identity)
    executable = _load(artifact)
    path = cache.put(key, artifact) if cache is not None else None
    return Compiled(path if path is not None else artifact, executable)
