"""The command line: --help, and `hlo` reading any form and writing any form."""
from __future__ import annotations

import subprocess
import sys

import pytest

import hlo
from neuron_customcall.cli import main
from tests.hlo import framework_modules as fm


def test_console_script_help():
    out = subprocess.run([sys.executable, "-m", "neuron_customcall", "--help"], capture_output=True, text=True, check=True)
    assert "usage: neuron-customcall" in out.stdout and "hlo" in out.stdout


@pytest.mark.parametrize("form", ["proto", "pbtxt"])
def test_hlo_converts_between_forms(tmp_path, form):
    src = tmp_path / "in.pb"
    src.write_bytes(fm.serialized("jax/while_loop"))
    out = tmp_path / "out"
    assert main(["hlo", str(src), "--to", form, "-o", str(out)]) == 0
    assert hlo.modules_equal(hlo.load(out), hlo.load(src))


def test_hlo_reports_malformed_input_and_fails(tmp_path, caplog):
    bad = tmp_path / "bad.pbtxt"
    bad.write_text("computations { bogus: 1 }\n")
    assert main(["hlo", str(bad)]) == 1
    assert f"{bad}:1:" in caplog.text
