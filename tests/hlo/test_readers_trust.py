"""hlo.load at the trust boundary (issue 16): a string with a NUL byte, a FIFO, /dev/zero and a
directory are HloErrors at once (were a raw ValueError, a hang, an endless read)."""
from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

import hlo


def _load_within(source, seconds: float = 30.0) -> BaseException | None:
    box: list = []

    def target() -> None:
        try:
            hlo.load(source)
            box.append(None)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box.append(e)
    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "hlo.load blocked"
    return box[0]


@pytest.mark.parametrize("kind", ["nul", "fifo", "dev-zero", "directory", "missing"])
def test_paths_that_are_not_hlo_files_are_hlo_errors(kind: str, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    source = {"nul": "graph\x00.txt", "fifo": fifo, "dev-zero": "/dev/zero", "directory": tmp_path,
              "missing": tmp_path / "nope.txt"}[kind]
    err = _load_within(source)
    assert isinstance(err, hlo.HloError), repr(err)
    assert "cannot read HLO module" in str(err)
