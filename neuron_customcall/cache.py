"""The on-disk compile cache: compiled artifacts (.neff) keyed by graph, flags and compiler.

Why a directory of files: the same graph is compiled by every process that runs it (a training
script, its evaluation job, the CLI), and compiling costs far more than reading a file. The key is
the SHA-256 of the graph's canonical fingerprint, the compile flags and the compiler version, so an
upgraded compiler or other flags never reuse a stale artifact, and two modules that differ only in
instruction ids share one entry.

Where it lives (first match wins):
  1. an explicit directory passed by the caller;
  2. NEURON_COMPILE_CACHE_URL (a path or a ``file://`` URL; other schemes are not supported);
  3. ``$XDG_CACHE_HOME/neuron-customcall`` or ``~/.cache/neuron-customcall``.
NEURON_COMPILE_CACHE_DISABLE=1 (or ``cache=False`` in the API, ``--no-cache`` on the command line)
turns it off.

Trust (docs/trust.md): an entry is compiled code the process will run, so whoever can write the
directory can choose what runs. A directory (or fan-out subdirectory, or entry) owned by another
user or writable by group or others is refused, with a warning, unless
NEURON_COMPILE_CACHE_ALLOW_SHARED=1 says the user trusts everyone who can write it; directories
this cache creates are private (0700). Entries are read only if they are regular files (never
through a symbolic link, never a FIFO or device), and the backend accepts one only if the key,
HLO fingerprint and compiler version recorded inside its checksummed manifest are this graph's.

Size: NEURON_COMPILE_CACHE_SIZE_LIMIT (bytes, or with a K/M/G suffix; 0 for no limit; 1G by
default) bounds the directory: the least recently used entries (by mtime, which a hit refreshes)
are removed until it holds at most 95% of the limit. The scan (a stat per entry: 17 ms of CPU for
2,000 entries) runs at a process's first install and then whenever the process has written
another 5% of the limit, so the directory stays within the limit without a scan per install
(several processes writing at once may overshoot it briefly by their unscanned writes). Temporaries that a killed writer left behind
are removed once they are an hour old, and by `neuron-customcall cache --clear` at once.

Concurrency: a write goes to a temporary file in the entry's own directory and is moved into place
with os.replace, which is atomic on POSIX and Windows; readers therefore see either no entry or a
whole one, and several processes compiling the same graph at once simply race to install identical
bytes. Entries are never locked.
"""
from __future__ import annotations

import hashlib
import logging
import os
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

log = logging.getLogger(__name__)

from emulator.artifact.reader import read_regular_file
from neuron_customcall.sizes import parse_size

CACHE_URL_ENV = "NEURON_COMPILE_CACHE_URL"
DISABLE_ENV = "NEURON_COMPILE_CACHE_DISABLE"
SHARED_ENV = "NEURON_COMPILE_CACHE_ALLOW_SHARED"
SIZE_LIMIT_ENV = "NEURON_COMPILE_CACHE_SIZE_LIMIT"
DEFAULT_SIZE_LIMIT = 1 << 30
STALE_TMP_SECONDS = 3600.0
SUFFIX = ".neff"
TMP_SUFFIX = ".tmp"
_FALSE = {"", "0", "false", "no", "off"}


class CacheConfigError(ValueError):
    """NEURON_COMPILE_CACHE_URL names a location this cache can not use."""


def disabled_by_env(environ: os._Environ | dict[str, str] | None = None) -> bool:
    """True when NEURON_COMPILE_CACHE_DISABLE holds a true value (1, true, yes, on)."""
    env = os.environ if environ is None else environ
    return env.get(DISABLE_ENV, "").strip().lower() not in _FALSE


def shared_allowed(environ: os._Environ | dict[str, str] | None = None) -> bool:
    """True when NEURON_COMPILE_CACHE_ALLOW_SHARED opts in to a directory others can write."""
    env = os.environ if environ is None else environ
    return env.get(SHARED_ENV, "").strip().lower() not in _FALSE


def size_limit_from_env(environ: os._Environ | dict[str, str] | None = None) -> int:
    """NEURON_COMPILE_CACHE_SIZE_LIMIT in bytes (0: no limit); a malformed value is a CacheConfigError."""
    env = os.environ if environ is None else environ
    raw = env.get(SIZE_LIMIT_ENV, "").strip()
    if not raw:
        return DEFAULT_SIZE_LIMIT
    size = parse_size(raw)
    if size is None:
        raise CacheConfigError(f"{SIZE_LIMIT_ENV}={raw!r}: expected a number of bytes, optionally with K, M, G "
                               "or T (0 for no limit)")
    return size


def _path_from_url(url: str) -> Path:
    parsed = urlparse(url)
    if parsed.scheme in ("", "file"):
        return Path(unquote(parsed.path) if parsed.scheme else url).expanduser()
    if len(parsed.scheme) == 1:  # a Windows drive letter, not a scheme
        return Path(url)
    raise CacheConfigError(f"{CACHE_URL_ENV}={url!r}: only local paths and file:// URLs are supported")


def default_cache_dir(environ: os._Environ | dict[str, str] | None = None) -> Path:
    """The cache directory named by the environment (see the module docstring)."""
    env = os.environ if environ is None else environ
    url = env.get(CACHE_URL_ENV, "").strip()
    if url:
        return _path_from_url(url)
    base = env.get("XDG_CACHE_HOME", "").strip()
    root = Path(base) if base else Path(env.get("HOME") or Path.home()) / ".cache"
    return root / "neuron-customcall"


def cache_key(fingerprint: str, flags_key: str, compiler_version: str) -> str:
    """The entry name for a graph fingerprint, a canonical flags string and a compiler version."""
    h = hashlib.sha256()
    for part in (fingerprint, flags_key, compiler_version):
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(8, "little"))  # length-prefixed: no two splits collide
        h.update(data)
    return h.hexdigest()


@dataclass(frozen=True)
class CompileCache:
    """A directory of artifacts, ``<dir>/<key[:2]>/<key>.neff``.

    `size_limit` and `allow_shared` default to the environment's settings (see the module
    docstring); a malformed size limit raises CacheConfigError here, not at the first install."""

    directory: Path
    size_limit: int | None = None
    allow_shared: bool | None = None
    _settings: tuple[int, bool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        limit = size_limit_from_env() if self.size_limit is None else self.size_limit
        shared = shared_allowed() if self.allow_shared is None else self.allow_shared
        object.__setattr__(self, "_settings", (limit, shared))

    @classmethod
    def from_env(cls, directory: str | os.PathLike | None = None) -> CompileCache | None:
        """The configured cache, or None when the environment disables it."""
        if directory is None and disabled_by_env():
            return None
        return cls(Path(directory) if directory is not None else default_cache_dir())

    @property
    def limit(self) -> int:
        """The size limit in bytes (0: none)."""
        return self._settings[0]

    def path(self, key: str) -> Path:
        # Two-character fan-out keeps directories small for people who compile many graphs.
        return self.directory / key[:2] / f"{key}{SUFFIX}"

    # -- trust -------------------------------------------------------------------------------
    def _untrusted(self, st: os.stat_result, what: str) -> str | None:
        """Why `st` (of the directory, a fan-out directory or an entry) can not be trusted, or None."""
        if self._settings[1]:
            return None
        if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
            return f"{what} is owned by uid {st.st_uid}, not by this user"
        if st.st_mode & 0o022:
            return f"{what} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
        return None

    def refusal(self, key: str | None = None) -> str | None:
        """Why this cache (and the fan-out directory of `key`) must not be used, or None; a
        directory that does not exist yet is fine (put creates it private)."""
        checks = [(self.directory, os.stat, "the cache directory")]
        if key is not None:
            checks.append((self.path(key).parent, os.lstat, "the cache subdirectory"))
        for path, stat_fn, what in checks:
            try:
                st = stat_fn(path)
            except FileNotFoundError:
                return None
            except OSError as e:
                return f"cannot examine {path}: {e}"
            if not stat.S_ISDIR(st.st_mode):
                return f"{what} {path} is not a directory"
            why = self._untrusted(st, f"{what} {path}")
            if why:
                return f"{why}; set {SHARED_ENV}=1 to trust everyone who can write it"
        return None

    def _refused(self, key: str) -> bool:
        why = self.refusal(key)
        if why is not None:
            _warn_once(f"compile cache not used: {why}")
        return why is not None

    # -- entries -----------------------------------------------------------------------------
    def get(self, key: str) -> tuple[Path, bytes] | None:
        """The entry's path and bytes, or None when there is none (or it can not be read, or can
        not be trusted). A hit marks the entry as recently used."""
        if self._refused(key):
            return None
        path = self.path(key)
        try:
            data, st = read_regular_file(path, follow_links=False)
        except FileNotFoundError:
            return None
        except OSError as e:
            log.warning("cannot read compile cache entry %s: %s", path, e)
            return None
        why = self._untrusted(st, f"compile cache entry {path}")
        if why is not None:
            log.warning("%s; not used (set %s=1 to trust it)", why, SHARED_ENV)
            return None
        try:
            os.utime(path, follow_symlinks=False)  # least-recently-used order is mtime order
        except OSError:
            pass  # another user's entry in a shared cache: still usable
        return path, data

    def put(self, key: str, data: bytes) -> Path | None:
        """Installs `data` as the entry atomically; returns its path, or None if it can't be written.

        A failed write never fails the compile that produced the artifact: the caller still has the
        bytes, the cache is only an optimisation. Evicts least recently used entries beyond the
        size limit afterwards."""
        path = self.path(key)
        tmp: str | None = None
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            path.parent.mkdir(mode=0o700, exist_ok=True)
            if self._refused(key):
                return None
            fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=TMP_SUFFIX, dir=path.parent)
            os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide entries from others sharing the cache
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            tmp = None
        except OSError as e:
            log.warning("cannot write compile cache entry %s: %s", path, e)
            return None
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
        written = _since_scan.get(self.directory)
        if written is None or (self.limit and written + len(data) >= self.limit // 20):
            self.evict(keep=path)
        else:
            _since_scan[self.directory] = (written or 0) + len(data)
        return path

    def discard(self, key: str) -> None:
        """Removes an entry (a corrupt one); a concurrent writer may already have replaced it."""
        _unlink(self.path(key))

    def entries(self) -> list[Path]:
        """All installed entries."""
        if not self.directory.is_dir():
            return []
        return sorted(self.directory.glob(f"??/*{SUFFIX}"))

    def temporaries(self) -> list[Path]:
        """Temporary files of writers (finished, running or killed)."""
        if not self.directory.is_dir():
            return []
        return sorted(self.directory.glob(f"??/.*{TMP_SUFFIX}"))

    def evict(self, keep: Path | None = None, now: float | None = None) -> int:
        """Removes temporaries older than an hour and, when the entries exceed 95% of the size
        limit, the least recently used ones (never `keep`) until they fit in it; returns the
        number of entries removed."""
        now = time.time() if now is None else now
        _since_scan[self.directory] = 0
        for tmp in self.temporaries():
            st = _lstat(tmp)
            if st is not None and now - st.st_mtime > STALE_TMP_SECONDS:
                _unlink(tmp)
        if not self.limit:
            return 0
        stats = [(st.st_mtime, st.st_size, p) for p in self.entries() if (st := _lstat(p)) is not None]
        total = sum(size for _, size, _ in stats)
        target = self.limit - self.limit // 20
        removed = 0
        for _, size, p in sorted(stats, key=lambda e: (e[0], e[2])):
            if total <= target:
                break
            if p != keep:
                _unlink(p)
                total -= size
                removed += 1
        if removed:
            log.info("compile cache %s: removed %d least recently used entries (limit %d bytes)",
                     self.directory, removed, self.limit)
        return removed

    def clear(self) -> int:
        """Removes every entry and every temporary; returns the number of entries removed."""
        entries = self.entries()
        for p in entries + self.temporaries():
            _unlink(p)
        return len(entries)

    def stats(self) -> dict[str, object]:
        """What the cache holds: entry count and bytes, the limit, temporaries, oldest and newest use."""
        entries = [st for p in self.entries() if (st := _lstat(p)) is not None]
        tmps = [st for p in self.temporaries() if (st := _lstat(p)) is not None]
        return {"directory": str(self.directory), "entries": len(entries),
                "bytes": sum(st.st_size for st in entries), "limit": self.limit,
                "temporaries": len(tmps), "temporary_bytes": sum(st.st_size for st in tmps),
                "oldest_use": min((st.st_mtime for st in entries), default=None),
                "newest_use": max((st.st_mtime for st in entries), default=None),
                "refused": self.refusal()}


_warned: set[str] = set()
_since_scan: dict[Path, int] = {}  # bytes this process installed per directory since its last scan


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning("%s", message)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as e:
        log.warning("cannot remove compile cache file %s: %s", path, e)
