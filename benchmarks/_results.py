"""One result format for every benchmark script, so that run_all.py can gather them in one table.

A row is one comparison: a workload timed on our side and on a peer's, in the same process and
run, with the target the issues set for it. Scripts write their rows as JSON (``--json PATH``);
nothing is pickled, and reading checks every field's type, so a script that changed its output
fails loudly here rather than as a wrong table.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path

FORMAT = "neuron-customcall-benchmark-rows/1"


@dataclass(frozen=True)
class Row:
    """Our time and the peer's for one workload. ``peer_s`` is None for an absolute target (a
    compile time, say) that has no peer; ``met`` is None when no target applies."""

    suite: str
    workload: str
    ours_s: float
    peer: str
    peer_s: float | None
    target: str = ""
    met: bool | None = None

    @property
    def ratio(self) -> float | None:
        """ours / peer: below 1 we are faster."""
        if self.peer_s is None or self.peer_s <= 0:
            return None
        return self.ours_s / self.peer_s


def ratio_target(ours_s: float, peer_s: float, at_most: float) -> tuple[str, bool]:
    """The target text and verdict of 'ours / peer <= at_most' (a speed-up of 1/at_most when
    at_most < 1)."""
    text = f"<= {at_most:g}x" if at_most >= 1 else f"<= {at_most:g}x ({1 / at_most:g}x faster)"
    return text, ours_s / peer_s <= at_most


def _check(row: dict) -> Row:
    names = {f.name for f in fields(Row)}
    if set(row) - {"ratio"} != names:
        raise ValueError(f"benchmark row has fields {sorted(row)}, expected {sorted(names)}")
    for name in ("suite", "workload", "peer", "target"):
        if not isinstance(row[name], str):
            raise ValueError(f"benchmark row field {name} must be text: {row!r}")
    for name, optional in (("ours_s", False), ("peer_s", True)):
        value = row[name]
        if value is None and optional:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ValueError(f"benchmark row field {name} must be seconds: {row!r}")
    if row["met"] is not None and not isinstance(row["met"], bool):
        raise ValueError(f"benchmark row field met must be true, false or null: {row!r}")
    return Row(**{k: v for k, v in row.items() if k != "ratio"})


def dumps(rows: list[Row]) -> str:
    return json.dumps({"format": FORMAT, "rows": [{**asdict(r), "ratio": r.ratio} for r in rows]}, indent=1)


def loads(text: str) -> list[Row]:
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("rows"), list):
        raise ValueError(f"not a benchmark result file of format {FORMAT}")
    return [_check(row) for row in data["rows"]]


def write_json(path: str | os.PathLike[str] | None, rows: list[Row]) -> None:
    """Writes the rows when the script was given --json PATH (does nothing for None)."""
    if path is not None:
        Path(path).write_text(dumps(rows) + "\n", encoding="utf-8")


def read_json(path: str | os.PathLike[str]) -> list[Row]:
    return loads(Path(path).read_text(encoding="utf-8"))
