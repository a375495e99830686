"""The one place GpSimd library images live as files, and the per-user private directories that
hold them (and the C++ build cache).

``dlopen`` needs a path, so every library the worker loads (built by the user, embedded in an
artifact, or rebuilt under the same name) is first written here under its content's SHA-256.
The directory is private to the user (mode 0700, owned by them, never a symbolic link), as
other compiler caches keep theirs, so nobody else can plant or swap a library in it; a file
found there is used only after its content hashes to its name, and new files are written
under a name `mkstemp` creates exclusively and then renamed into place, so no link is ever
followed. The worker hashes the file it opens once more and loads exactly those bytes (see
worker.py), so what runs is the library the host asked for.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from pathlib import Path

from emulator.gpsimd.errors import LibraryError

#: Overrides the private base directory (default: ``$TMPDIR/neuron_customcall-<uid>``).
ENV_BASE = "NEURON_CUSTOMCALL_PRIVATE_DIR"
PREFIX = "libgpsimd-"
SUFFIX = ".so"


def digest(image: bytes) -> str:
    return hashlib.sha256(image).hexdigest()


def private_directory(path: str | os.PathLike[str]) -> Path:
    """Creates `path` (and missing parents) with mode 0700 if needed and checks that it is a real
    directory (not a link) owned by this user and closed to everyone else; raises `LibraryError`
    naming the problem otherwise."""
    path = Path(path)
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.lstat(path)
    except OSError as e:
        raise LibraryError(f"cannot create the private directory {path}: {e.strerror}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise LibraryError(f"{path} must be a directory of this user's, not a symbolic link or a file; "
                           "remove it or point the cache elsewhere")
    if info.st_uid != os.getuid():
        raise LibraryError(f"{path} belongs to user id {info.st_uid}, not to this user ({os.getuid()}): "
                           "another user could plant libraries in it; remove it or point the cache elsewhere")
    if info.st_mode & 0o077:
        raise LibraryError(f"{path} is open to other users (mode {stat.S_IMODE(info.st_mode):o}); "
                           "make it 0700 (chmod 700) or point the cache elsewhere")
    return path


def private_base() -> Path:
    """This user's private base directory, checked (see `private_directory`)."""
    override = os.environ.get(ENV_BASE)
    base = Path(override) if override else Path(tempfile.gettempdir()) / f"neuron_customcall-{os.getuid()}"
    return private_directory(base)


def library_directory() -> Path:
    """Where library images are stored: ``<private base>/gpsimd``."""
    return private_directory(private_base() / "gpsimd")


def read_regular(path: Path, limit: int | None = None) -> bytes:
    """The bytes of a regular file, opened without following a link at its last component."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise LibraryError(f"{path} is not a regular file")
        if limit is not None and info.st_size > limit:
            raise LibraryError(f"{path} is larger than {limit} bytes")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _verified(path: Path, expected: str) -> bool:
    """True when `path` is a regular file of ours whose content hashes to `expected`."""
    try:
        return digest(read_regular(path)) == expected
    except (OSError, LibraryError):
        return False


def install(image: bytes) -> tuple[Path, str]:
    """Stores library bytes under their SHA-256 and returns (path, hex digest). A file already
    there is reused only when its content matches; otherwise it is replaced."""
    directory = library_directory()
    sha = digest(image)
    path = directory / f"{PREFIX}{sha}{SUFFIX}"
    if _verified(path, sha):
        return path, sha
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=SUFFIX, dir=directory)  # O_EXCL, mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(image)
        os.replace(tmp, path)  # rename: replaces a link itself, never writes through it
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path, sha


def install_file(source: str | os.PathLike[str]) -> tuple[Path, str]:
    """Stores a copy of a library file (see `install`)."""
    try:
        return install(read_regular(Path(source)))
    except OSError as e:
        raise LibraryError(f"cannot read the GpSimd library {source}: {e.strerror}") from None
