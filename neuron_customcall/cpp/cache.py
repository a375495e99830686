"""A content-addressed cache of compiled objects, keyed by compiler, flags and source content and
validated against the content of every header the compiler reported (-MMD), like make, but by
hashes rather than timestamps so that copies and checkouts reuse the cache."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_digest(path: Path) -> str | None:
    try:
        return digest(path.read_bytes())
    except OSError:
        return None


def parse_depfile(text: str) -> list[Path]:
    """The prerequisites listed in a make-style dependency file written by -MMD."""
    body = text.replace("\\\n", " ")
    _, _, deps = body.partition(":")
    return [Path(p) for p in deps.split() if p != "\\"]


class ObjectCache:
    """Objects under `directory`, one `<key>.o` with a `<key>.json` manifest of dependencies."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def key(self, source: Path, flags: tuple[str, ...], identity: str) -> str:
        parts = [identity, *flags, str(source.resolve()), digest(source.read_bytes())]
        return digest("\0".join(parts).encode())

    def paths(self, key: str) -> tuple[Path, Path, Path]:
        return (self.directory / f"{key}.o", self.directory / f"{key}.json", self.directory / f"{key}.d")

    def lookup(self, key: str) -> Path | None:
        obj, manifest, _ = self.paths(key)
        if not obj.exists() or not manifest.exists():
            return None
        deps = json.loads(manifest.read_text())["deps"]
        if any(file_digest(Path(p)) != h for p, h in deps.items()):
            return None
        return obj

    def record(self, key: str) -> Path:
        obj, manifest, depfile = self.paths(key)
        deps = parse_depfile(depfile.read_text()) if depfile.exists() else []
        data = {"deps": {str(p.resolve()): file_digest(p) for p in deps}}
        tmp = manifest.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(data, sort_keys=True))
        os.replace(tmp, manifest)
        return obj
