"""Library images registered in this process, by content hash (SHA-256 hex).

Why: a C++ custom op's backend_config carries its library image (about 140 KB for the tutorial's
ReLU), and torch_xla copies the config into its IR node on every call of the op, each training
step. A config may instead name the image by hash (docs/backend-config.md, "References"), the
way torch_neuronx registers a library once per process; this table is where such a reference is
resolved. A reference is meaningful only in the process that registered its image.
"""
from __future__ import annotations

import hashlib
import threading

_IMAGES: dict[str, bytes] = {}
_LOCK = threading.Lock()


def register(image: bytes) -> str:
    """Registers `image` (kept for the life of the process); returns its SHA-256 hex digest."""
    digest = hashlib.sha256(image).hexdigest()
    with _LOCK:
        _IMAGES.setdefault(digest, bytes(image))
    return digest


def image(digest: str) -> bytes | None:
    """The registered image of that digest, None when this process has none."""
    return _IMAGES.get(digest)
