"""The main job's example runs end to end: every form reads back equal, training matches XLA:CPU."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import hlo

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "hlo_tour.py"


def test_hlo_tour_runs_and_writes_every_form(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("hlo_tour", EXAMPLE)
    tour = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tour)
    assert tour.main(["--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "All modules read back equal" in out and "differ from XLA:CPU by at most" in out
    for name in ("jax_train_step", "torch_xla_train_step"):
        forms = [hlo.load(tmp_path / f"{name}.{suffix}") for suffix in ("pb", "pbtxt", "hlo.txt")]
        assert all(hlo.modules_equal(forms[0], f) for f in forms[1:])
