"""The benchmark chain: the shared row format, the RESULTS.md writer, and run_all.py driving
scripts in their own processes (stand-ins, and one real script with --quick). Not a timed test."""
from __future__ import annotations

import json
import math
import sys
import textwrap
from pathlib import Path

import pytest

from benchmarks import _machine, _report, run_all
from benchmarks._results import Row, dumps, loads, ratio_target

ROWS = [
    Row("suite A", "add 4096x4096", 0.0395, "numpy", 0.0348, "<= 2x", True),
    Row("suite A", "add 4096x4096", 0.0395, "triton-interpret", 1.2, "<= 0.02x (50x faster)", False),
    Row("suite B", "compile | cache", 0.0154, "(absolute target)", None, "<= 100 ms", True),
    Row("suite B", "e2e", 2.5, "XLA:CPU", 0.0000043),
]


def test_rows_round_trip_through_json_with_their_ratio() -> None:
    text = dumps(ROWS)
    assert loads(text) == ROWS
    data = json.loads(text)["rows"]
    assert math.isclose(data[0]["ratio"], 0.0395 / 0.0348) and data[2]["ratio"] is None


@pytest.mark.parametrize("change", [
    {"ours_s": "fast"}, {"ours_s": float("nan")}, {"peer_s": -1.0}, {"met": "yes"}, {"suite": 3},
    {"extra": 1},
])
def test_malformed_rows_are_refused(change: dict) -> None:
    data = json.loads(dumps(ROWS[:1]))
    data["rows"][0].update(change)
    with pytest.raises(ValueError):
        loads(json.dumps(data))


def test_other_documents_are_refused() -> None:
    with pytest.raises(ValueError, match="not a benchmark result file"):
        loads(json.dumps({"rows": []}))


def test_ratio_target_states_speed_ups_and_slow_downs() -> None:
    assert ratio_target(1.0, 0.8, 1.5) == ("<= 1.5x", True)
    assert ratio_target(1.0, 40.0, 1 / 50) == ("<= 0.02x (50x faster)", False)


def test_results_markdown_has_the_machine_and_a_table_per_suite() -> None:
    runs = [_report.ScriptRun("python benchmarks/a.py --json <rows.json>", 12.34, 0, 4),
            _report.ScriptRun("python benchmarks/b.py --json <rows.json>", 1.0, 2, 0)]
    text = _report.render(ROWS, [("CPU", "Test CPU"), ("cores", "2")], runs, "2026-01-01 00:00 UTC",
                          "1.00", "2.00", quick=False)
    assert "**Targets met: 2 of 3.**" in text
    assert "| CPU | Test CPU |" in text and "| load average after | 2.00 |" in text
    assert text.index("## suite A") < text.index("## suite B")
    assert "| add 4096x4096 | 39.50 ms | numpy | 34.80 ms | 1.14x | <= 2x | yes |" in text
    assert "| add 4096x4096 | 39.50 ms | triton-interpret | 1.20 s | 0.0329x | <= 0.02x (50x faster) | **no** |" in text
    assert "| compile \\| cache | 15.40 ms | (absolute target) | — | — | <= 100 ms | yes |" in text
    assert "| e2e | 2.50 s | XLA:CPU | 4.3 µs | 5.81e+05x | — | — |" in text
    assert "`python benchmarks/b.py --json <rows.json>` exited with 2" in text


def test_machine_description_names_cpu_memory_and_versions() -> None:
    facts = dict(_machine.describe())
    assert {"CPU", "cores", "memory", "Python", "packages", "NumPy's BLAS"} <= set(facts)
    assert "numpy " in facts["packages"] and "torch " in facts["packages"]


STAND_IN = """
import argparse, sys
sys.path.insert(0, {root!r})
from benchmarks._results import Row, write_json
parser = argparse.ArgumentParser()
parser.add_argument("--quick", action="store_true")
parser.add_argument("--json")
args = parser.parse_args()
print("stand-in running, quick =", args.quick)
write_json(args.json, [Row("stand-in suite", "sleep", 0.5 if args.quick else 5.0, "peer", 1.0, "<= 1x",
                           args.quick)])
"""


def test_run_all_collects_rows_from_scripts_in_their_own_processes(tmp_path: Path, capsys) -> None:
    good = tmp_path / "good.py"
    good.write_text(textwrap.dedent(STAND_IN.format(root=str(Path(run_all.__file__).parents[1]))))
    bad = tmp_path / "bad.py"
    bad.write_text("import sys; sys.exit(3)\n")
    out = tmp_path / "RESULTS.md"
    code = run_all.main(["--quick", "--out", str(out)], scripts=(run_all.Script(str(good)), run_all.Script(str(bad))))
    assert code == 1  # one script failed; the results are written all the same
    text = out.read_text(encoding="utf-8")
    assert "| sleep | 500.00 ms | peer | 1.00 s | 0.5x | <= 1x | yes |" in text
    assert "exited with 3" in text and "--quick" in text
    printed = capsys.readouterr().out
    assert "[1/2]" in printed and "[2/2]" in printed


def test_one_real_script_quick(tmp_path: Path) -> None:
    """nki_peers.py --quick --skip-peers (NKI kernels against NumPy: seconds, no peer simulators)."""
    out = tmp_path / "RESULTS.md"
    script = run_all.Script("nki_peers.py", ("--skip-peers",))
    assert run_all.main(["--quick", "--out", str(out)], scripts=(script,)) == 0
    text = out.read_text(encoding="utf-8")
    assert "## NKI kernels: emulator vs CPU simulators and NumPy (issue 4)" in text
    assert text.count("| numpy |") == 4


def test_every_script_run_all_names_exists() -> None:
    here = Path(run_all.__file__).parent
    assert all((here / s.name).is_file() for s in run_all.SCRIPTS)
    assert sys.executable  # the scripts run under this interpreter
