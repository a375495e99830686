"""Sizes in settings: "1G", "512M", "12345" (bytes). One parser for the variables that take one
(NEURON_COMPILE_CACHE_SIZE_LIMIT, NEURON_CUSTOMCALL_MEMORY_LIMIT)."""
from __future__ import annotations

import re

_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def parse_size(raw: str) -> int | None:
    """Bytes for "123", "10M", "2 GiB", "1k" (powers of 1024); None if `raw` is not a size."""
    m = _SIZE.match(raw)
    if m is None:
        return None
    return int(m.group(1)) << (10 * "_kmgt".index(m.group(2).lower() or "_"))


def format_size(n: int) -> str:
    """A short human form of a byte count (for messages)."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} bytes"
