"""The one error an artifact reader raises for anything wrong with the bytes it is given."""
from __future__ import annotations


class ArtifactError(Exception):
    """A truncated, corrupted, malformed or wrong-version artifact (the message says which)."""
