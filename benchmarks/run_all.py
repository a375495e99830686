"""Runs every benchmark against its peers and writes benchmarks/RESULTS.md.

    python benchmarks/run_all.py [--quick] [--only SCRIPT ...] [--out PATH]

Each script runs in its own process (a clean interpreter: no library loaded or cache warmed by an
earlier one, and a crash stays its own), with ``--json`` so that its rows come back in the shared
format (benchmarks/_results.py). The machine is described, with the load average before and
after, because a shared machine's load moves every number here. ``--quick`` passes through to
every script: smaller workloads and fewer runs, to check that the whole chain works.
"""
from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks import _machine, _report  # noqa: E402
from benchmarks._results import Row, read_json  # noqa: E402


@dataclass(frozen=True)
class Script:
    """A benchmark script in this folder and the arguments it always gets here."""

    name: str
    args: tuple[str, ...] = ()


SCRIPTS = (
    # BLAS threads as a user gets them: the emulator drops to one thread itself when the machine is
    # loaded (Executable.run), while forcing one here would halve its matmuls on a quiet machine.
    Script("mlp_vs_xla_cpu.py"),
    Script("hlo_ops_vs_xla_cpu.py"),
    Script("nki_peers.py"),
    Script("nki_kernel_speed.py"),
    Script("gpsimd_relu.py"),
    Script("gpsimd_call.py"),
    Script("gpsimd_multicore.py"),
    Script("examples_peers.py"),
    Script("pjrt_jax_vs_cpu.py"),
    Script("torch_xla_device.py"),
    Script("spmd_data_parallel.py"),
)


def run_script(script: Script, quick: bool, scratch: Path, index: int, total: int,
               timeout: float) -> tuple[_report.ScriptRun, list[Row]]:
    """Runs one script (its output goes straight to ours, so progress is visible) and reads its rows."""
    out = scratch / f"{Path(script.name).stem}.json"
    cmd = [sys.executable, str(HERE / script.name), *script.args, *(["--quick"] if quick else []), "--json", str(out)]
    shown = shlex.join(["python", f"benchmarks/{Path(script.name).name}", *cmd[2:-2]]) + " --json <rows.json>"
    print(f"\n[{index}/{total}] {shown}", flush=True)
    start = time.perf_counter()
    try:
        code = subprocess.run(cmd, cwd=HERE.parent, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        code = -9
        print(f"[{index}/{total}] timed out after {timeout:.0f} s", flush=True)
    took = time.perf_counter() - start
    rows: list[Row] = []
    if code == 0:
        try:
            rows = read_json(out)
        except (OSError, ValueError) as exc:
            print(f"[{index}/{total}] unreadable rows: {exc}", flush=True)
            code = 1
    print(f"[{index}/{total}] {script.name}: exit {code}, {len(rows)} rows, {took:.1f} s", flush=True)
    return _report.ScriptRun(shown, took, code, len(rows)), rows


def main(argv: list[str] | None = None, scripts: tuple[Script, ...] = SCRIPTS) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="passed to every script: a fast check of the chain")
    parser.add_argument("--only", nargs="+", metavar="SCRIPT", help="run only these scripts (file names)")
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md", help="where to write the results")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds allowed per script")
    args = parser.parse_args(argv)
    chosen = [s for s in scripts if not args.only or s.name in args.only]
    unknown = set(args.only or ()) - {s.name for s in scripts}
    if unknown:
        parser.error(f"unknown scripts: {', '.join(sorted(unknown))}")
    started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load_before = _machine.load_average()
    runs, rows = [], []
    with tempfile.TemporaryDirectory(prefix="benchmarks-") as scratch:
        for k, script in enumerate(chosen, 1):
            run, got = run_script(script, args.quick, Path(scratch), k, len(chosen), args.timeout)
            runs.append(run)
            rows += got
    text = _report.render(rows, _machine.describe(), runs, started, load_before, _machine.load_average(),
                          args.quick)
    args.out.write_text(text, encoding="utf-8")  # µs and dashes, whatever the locale
    print(f"\nwrote {os.path.relpath(args.out)}: {len(rows)} rows from {len(runs)} scripts")
    return 0 if all(run.returncode == 0 for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
