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

Concurrency: a write goes to a temporary file in the entry's own directory and is moved into place
with os.replace, which is atomic on POSIX and Windows; readers therefore see either no entry or a
whole one, and several processes compiling the same graph at once simply race to install identical
bytes. Entries are never locked.
"""
from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

log = logging.getLogger(__name__)

CACHE_URL_ENV = "NEURON_COMPILE_CACHE_URL"
DISABLE_ENV = "NEURON_COMPILE_CACHE_DISABLE"
SUFFIX = ".neff"
_FALSE = {"", "0", "false", "no", "off"}


class CacheConfigError(ValueError):
    """NEURON_COMPILE_CACHE_URL names a location this cache can not use."""


def disabled_by_env(environ: os._Environ | dict[str, str] | None = None) -> bool:
    """True when NEURON_COMPILE_CACHE_DISABLE holds a true value (1, true, yes, on)."""
    env = os.environ if environ is None else environ
    return env.get(DISABLE_ENV, "").strip().lower() not in _FALSE


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
    """A directory of artifacts, ``<dir>/<key[:2]>/<key>.neff``."""

    directory: Path

    @classmethod
    def from_env(cls, directory: str | os.PathLike | None = None) -> CompileCache | None:
        """The configured cache, or None when the environment disables it."""
        if directory is None and disabled_by_env():
            return None
        return cls(Path(directory) if directory is not None else default_cache_dir())

    def path(self, key: str) -> Path:
        # Two-character fan-out keeps directories small for people who compile many graphs.
        return self.directory / key[:2] / f"{key}{SUFFIX}"

    def get(self, key: str) -> tuple[Path, bytes] | None:
        """The entry's path and bytes, or None when there is none (or it can not be read)."""
        path = self.path(key)
        try:
            return path, path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            log.warning("cannot read compile cache entry %s: %s", path, e)
            return None

    def put(self, key: str, data: bytes) -> Path | None:
        """Installs `data` as the entry atomically; returns its path, or None if it can't be written.

        A failed write never fails the compile that produced the artifact: the caller still has the
        bytes, the cache is only an optimisation.
        """
        path = self.path(key)
        tmp: str | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=path.parent)
            os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide entries from others sharing the cache
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            tmp = None
            return path
        except OSError as e:
            log.warning("cannot write compile cache entry %s: %s", path, e)
            return None
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass

    def discard(self, key: str) -> None:
        """Removes an entry (a corrupt one); a concurrent writer may already have replaced it."""
        try:
            self.path(key).unlink()
        except FileNotFoundError:
            pass
        except OSError as e:
            log.warning("cannot remove compile cache entry %s: %s", self.path(key), e)

    def entries(self) -> list[Path]:
        """All installed entries (for tests and a future `cache` command)."""
        if not self.directory.is_dir():
            return []
        return sorted(self.directory.glob(f"??/*{SUFFIX}"))
