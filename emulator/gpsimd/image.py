"""Library images as files: ``dlopen`` needs a path, and a library that arrives as bytes (from an
artifact) or is rebuilt under the same name must get a path of its own, so images are written to
content-addressed files."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def materialise(image: bytes, directory: Path) -> Path:
    """Writes library bytes to a content-addressed file (dlopen needs a path) and returns it."""
    digest = hashlib.sha256(image).hexdigest()
    path = directory / f"libgpsimd-{digest[:24]}.so"
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(image)
        os.replace(tmp, path)
    return path
