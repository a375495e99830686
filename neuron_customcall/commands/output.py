"""Where the commands write files: one checked writer, so that a directory, a missing folder or an
unwritable place named as an output is a one-line error before any work is done, never a
traceback after it (and never a file named after the directory, as `np.savez('.')` makes `..npz`)."""
from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path

import numpy as np


class OutputError(ValueError):
    """An output path the command can not write."""


def check_output(path: Path) -> Path:
    """`path` if a file can be written there; OutputError naming the problem otherwise."""
    if path.is_dir():
        raise OutputError(f"output {path} is a directory; name a file")
    parent = path.parent
    if not parent.is_dir():
        raise OutputError(f"output {path}: the folder {parent} does not exist")
    return path


def write_output(path: Path, data: bytes) -> None:
    """Writes `data` to the checked `path`."""
    check_output(path)
    try:
        path.write_bytes(data)
    except OSError as e:
        raise OutputError(f"can not write {path}: {e.strerror or e}") from None


def npz_path(path: Path) -> Path:
    """The file `np.savez` would write for `path` (it adds .npz when missing), checked."""
    check_output(path)
    return path if path.suffix == ".npz" else path.with_name(path.name + ".npz")


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """An npz archive of `arrays` (never pickled: object arrays are refused by NumPy)."""
    buf = io.BytesIO()
    np.savez(buf, allow_pickle=False, **arrays)
    return buf.getvalue()
