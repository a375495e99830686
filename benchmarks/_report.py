"""RESULTS.md from benchmark rows: the machine, then one table per suite.

Pure formatting (rows and facts in, markdown out), so that it is tested with made-up rows.
"""
from __future__ import annotations

from dataclasses import dataclass

from benchmarks._results import Row


@dataclass(frozen=True)
class ScriptRun:
    """One benchmark script's run: the command, how long it took, how it ended."""

    command: str
    seconds: float
    returncode: int
    rows: int


def seconds(value: float | None) -> str:
    """A time in the unit that keeps it readable (us, ms, s)."""
    if value is None:
        return "—"
    if value < 1e-3:
        return f"{value * 1e6:.1f} µs"
    if value < 1:
        return f"{value * 1e3:.2f} ms"
    return f"{value:.2f} s"


def ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}x"


def verdict(met: bool | None) -> str:
    return {True: "yes", False: "**no**", None: "—"}[met]


def _cell(text: str) -> str:
    return text.replace("|", "\\|") if text else "—"


def suite_table(rows: list[Row]) -> list[str]:
    lines = ["| workload | ours | peer | peer's time | ratio (ours / peer) | target | met |",
             "| --- | ---: | --- | ---: | ---: | --- | --- |"]
    for r in rows:
        lines.append(f"| {_cell(r.workload)} | {seconds(r.ours_s)} | {_cell(r.peer)} | {seconds(r.peer_s)} | "
                     f"{ratio(r.ratio)} | {_cell(r.target)} | {verdict(r.met)} |")
    return lines


def render(rows: list[Row], machine: list[tuple[str, str]], runs: list[ScriptRun], started: str,
           load_before: str, load_after: str, quick: bool) -> str:
    """The whole document. Suites keep the order in which the scripts reported them."""
    judged = [r for r in rows if r.met is not None]
    lines = ["# Benchmark results", "",
             "Written by `python benchmarks/run_all.py`"
             + (" --quick (smaller workloads, fewer runs: a check of the scripts, not a measurement)" if quick else "")
             + f", started {started}. Every comparison was measured in this one run, ours and the peer's "
             "side by side in the same process. Ratio = our time / the peer's time (below 1: we are faster).", "",
             f"**Targets met: {sum(bool(r.met) for r in judged)} of {len(judged)}.**", "",
             "## Machine", "", "| | |", "| --- | --- |"]
    lines += [f"| {label} | {_cell(value)} |" for label, value in machine]
    lines += [f"| load average before | {load_before} |", f"| load average after | {load_after} |", ""]
    lines += ["## Scripts", "", "| command | wall time | exit | rows |", "| --- | ---: | ---: | ---: |"]
    lines += [f"| `{run.command}` | {run.seconds:.1f} s | {run.returncode} | {run.rows} |" for run in runs]
    suites: dict[str, list[Row]] = {}
    for r in rows:
        suites.setdefault(r.suite, []).append(r)
    for suite, members in suites.items():
        lines += ["", f"## {suite}", "", *suite_table(members)]
    failed = [run for run in runs if run.returncode]
    if failed:
        lines += ["", "## Failed scripts", ""]
        lines += [f"- `{run.command}` exited with {run.returncode}; its rows are missing above" for run in failed]
    return "\n".join(lines) + "\n"
