"""The shared end of the doc generators (gen_opcode_docs.py, gen_nki_api_docs.py): write the
regenerated text, or with --check report that the committed file is stale."""
from __future__ import annotations

import sys
from pathlib import Path


def write_or_check(path: Path, new: str, check: bool, what: str, command: str) -> int:
    """0 when `path` was written (or, checking, already holds `new`); 1 when it is stale."""
    if check:
        if path.read_text() != new:
            print(f"{path}: {what} is stale; run python {command}", file=sys.stderr)
            return 1
        return 0
    path.write_text(new)
    return 0
