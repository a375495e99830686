"""Quiet by default; -v / -q anywhere on the command line (before or after the subcommand)."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_customcall.cli import build_parser, log_level

ROOT = Path(__file__).resolve().parents[3]
HLO = "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p)\n}\n"


@pytest.mark.parametrize("verbose, quiet, level", [
    (0, 0, logging.WARNING), (1, 0, logging.INFO), (2, 0, logging.DEBUG), (5, 0, logging.DEBUG),
    (0, 1, logging.ERROR), (0, 4, logging.CRITICAL), (1, 1, logging.WARNING)])
def test_levels(verbose: int, quiet: int, level: int) -> None:
    assert log_level(verbose, quiet) == level


@pytest.mark.parametrize("argv, verbose, quiet", [
    (["hlo", "x.hlo"], 0, 0), (["-v", "hlo", "x.hlo"], 1, 0), (["hlo", "-v", "x.hlo"], 1, 0),
    (["hlo", "x.hlo", "-vv"], 2, 0), (["hlo", "x.hlo", "--quiet"], 0, 1), (["-q", "hlo", "x.hlo"], 0, 1)])
def test_flags_anywhere_on_the_line(argv: list[str], verbose: int, quiet: int) -> None:
    args = build_parser().parse_args(argv)
    assert (args.verbose, args.quiet) == (verbose, quiet)


def _cli(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "neuron_customcall", *argv], capture_output=True, text=True,
                          env=env, timeout=300)


def test_quiet_by_default_and_v_after_the_subcommand_shows_info(tmp_path: Path) -> None:
    src = tmp_path / "m.hlo"
    src.write_text(HLO)
    quiet = _cli("hlo", str(src), "--to", "pbtxt", "-o", str(tmp_path / "a.pbtxt"))
    assert quiet.returncode == 0, quiet.stderr
    assert "INFO" not in quiet.stderr
    loud = _cli("hlo", str(src), "--to", "pbtxt", "-o", str(tmp_path / "b.pbtxt"), "-v")
    assert loud.returncode == 0 and "INFO neuron_customcall.commands.hlo_cmd: wrote" in loud.stderr
