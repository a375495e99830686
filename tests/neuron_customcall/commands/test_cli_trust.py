"""The command line at the trust boundary (issue 16): native code in an artifact is shown and can be
refused; directories, missing folders, FIFOs and devices given as paths are one-line errors (never
a traceback, a hang or a file named `..npz`); an npz header is checked before anything is
allocated; `cache --stats` and `--clear` of leftover temporaries."""
from __future__ import annotations

import json

import logging
import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import hlo
from emulator.artifact import KernelPayload, read_artifact, write_artifact
from emulator.artifact.writer import ArtifactContents
from emulator.native_policy import NO_NATIVE_ENV
from neuron_customcall.cli import main
from neuron_customcall.compiler import compile_module

ROOT = Path(__file__).resolve().parents[3]
ADD = "HloModule g\n\nENTRY main {\n  p0 = f32[4]{0} parameter(0)\n  ROOT r = f32[4]{0} add(p0, p0)\n}\n"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "g.txt").write_text(ADD)
    plain = compile_module(hlo.load(ADD))
    (tmp_path / "g.neff").write_bytes(plain)
    art = read_artifact(plain)
    native = write_artifact(ArtifactContents(art.manifest, art.program, art.constants, [
        KernelPayload("custom-call.1", "gpsimd-library", b"\x7fELF planted library")]))
    (tmp_path / "native.neff").write_bytes(native)
    np.savez(tmp_path / "in.npz", np.arange(4, dtype=np.float32))
    return {"dir": tmp_path, "hlo": tmp_path / "g.txt", "neff": tmp_path / "g.neff",
            "native": tmp_path / "native.neff", "inputs": tmp_path / "in.npz"}


# -- native code -------------------------------------------------------------------------------
def test_inspect_says_first_whether_native_code_is_carried(files: dict, capsys: pytest.CaptureFixture,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    assert main(["inspect", str(files["native"])]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].endswith("NATIVE CODE: YES - 1 GpSimd payload(s): custom-call.1 "
                                        "(gpsimd-library, 20 bytes). Running this artifact runs compiled C++ "
                                        f"with your rights; refuse it with --no-native-code or {NO_NATIVE_ENV}=1 "
                                        "unless you trust its author")
    assert main(["inspect", str(files["neff"])]) == 0
    assert "native code: none" in capsys.readouterr().out.splitlines()[0]
    assert main(["inspect", "--json", str(files["native"])]) == 0
    assert "NATIVE CODE: YES" in caplog.text
    native = json.loads(capsys.readouterr().out)["native_code"]  # on standard output too, for scripts
    assert [(k["name"], k["kind"], k["bytes"]) for k in native] == [("custom-call.1", "gpsimd-library", 20)]
    assert len(native[0]["sha256"]) == 64
    assert main(["inspect", "--json", str(files["neff"])]) == 0
    assert json.loads(capsys.readouterr().out)["native_code"] == []


@pytest.mark.parametrize("how", ["flag", "env"])
@pytest.mark.parametrize("command", ["run", "profile"])
def test_native_code_can_be_refused(files: dict, how: str, command: str, monkeypatch: pytest.MonkeyPatch,
                                    caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    args = [command, str(files["native"]), "--inputs", str(files["inputs"])]
    if command == "profile":
        args += ["-o", str(tmp_path / "t.json")]
    if how == "flag":
        args.append("--no-native-code")
    else:
        monkeypatch.setenv(NO_NATIVE_ENV, "1")
    assert main(args) == 1
    assert "artifact carries native code" in caplog.text and "custom-call.1 (gpsimd-library)" in caplog.text
    plain = [command, str(files["neff"]), "--inputs", str(files["inputs"])] + args[4:]
    assert main(plain) == 0  # an artifact without native code still runs


def test_load_artifact_refuses_native_code_before_loading_it(files: dict) -> None:
    import emulator

    with pytest.raises(emulator.ArtifactError, match="carries native code"):
        emulator.load_artifact(files["native"], allow_native=False)
    emulator.load_artifact(files["neff"], allow_native=False)


# -- paths that are not files ------------------------------------------------------------------
def _fails(args: list[str], caplog: pytest.LogCaptureFixture, message: str) -> None:
    caplog.clear()
    assert main(args) == 1
    assert message in caplog.text


def test_directories_and_missing_folders_as_paths(files: dict, caplog: pytest.LogCaptureFixture,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    d = files["dir"]
    monkeypatch.chdir(d)
    _fails(["compile", "."], caplog, "Is a directory")
    _fails(["compile", str(files["hlo"]), "-o", str(d)], caplog, "is a directory; name a file")
    _fails(["compile", str(files["hlo"]), "-o", str(d / "nodir" / "x.neff")], caplog, "does not exist")
    _fails(["hlo", str(files["hlo"]), "-o", str(d)], caplog, "is a directory; name a file")
    _fails(["hlo", str(files["hlo"]), "-o", "nodir/x.txt"], caplog, "does not exist")
    _fails(["run", str(files["neff"]), "--inputs", str(files["inputs"]), "--outputs", "nodir/o.npz"], caplog,
           "does not exist")
    _fails(["run", str(files["neff"]), "--inputs", str(files["inputs"]), "--outputs", "."], caplog,
           "is a directory")
    assert not (d / "..npz").exists() and not (d.parent / "..npz").exists()
    _fails(["run", str(d)], caplog, "a directory")
    _fails(["inspect", str(d)], caplog, "a directory")
    _fails(["run", str(files["neff"]), "--inputs", str(d)], caplog, "a directory")


def test_outputs_without_suffix_get_npz(files: dict, capsys: pytest.CaptureFixture) -> None:
    out = files["dir"] / "o"
    assert main(["run", str(files["neff"]), "--inputs", str(files["inputs"]), "--outputs", str(out)]) == 0
    with np.load(files["dir"] / "o.npz") as npz:
        np.testing.assert_array_equal(npz["r"], np.arange(4) * 2)


_SPECIAL = {"fifo": lambda p: os.mkfifo(p), "dev-zero": lambda p: p.symlink_to("/dev/zero")}


@pytest.mark.parametrize("kind", sorted(_SPECIAL))
@pytest.mark.parametrize("command", ["run", "inspect", "compile", "hlo", "inputs"])
def test_fifos_and_devices_are_refused_at_once(files: dict, kind: str, command: str) -> None:
    special = files["dir"] / "special"
    _SPECIAL[kind](special)
    args = {"run": ["run", str(special)], "inspect": ["inspect", str(special)],
            "compile": ["compile", str(special), "-o", str(files["dir"] / "x.neff")],
            "hlo": ["hlo", str(special)],
            "inputs": ["run", str(files["neff"]), "--inputs", str(special)]}[command]
    done = subprocess.run([sys.executable, "-m", "neuron_customcall", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)  # today: blocks forever (fifo) or fills memory (/dev/zero)
    assert done.returncode == 1, done.stderr
    assert "not a regular file" in done.stderr and "Traceback" not in done.stderr


# -- npz headers -------------------------------------------------------------------------------
def _npz_with_header(path: Path, shape: tuple[int, ...]) -> None:
    header = repr({"descr": "<f4", "fortran_order": False, "shape": shape}).encode()
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    npy = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + bytes(16)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("arr_0.npy", npy)


def test_npz_header_is_checked_before_allocating(files: dict, caplog: pytest.LogCaptureFixture) -> None:
    bomb = files["dir"] / "bomb.npz"
    _npz_with_header(bomb, (100000, 100000))  # today: 37 GiB allocated before the shape check
    _fails(["run", str(files["neff"]), "--inputs", str(bomb)], caplog, "header claims float32[100000, 100000]")
    big = files["dir"] / "big.npz"
    np.savez(big, np.zeros(64, np.float32))
    _fails(["run", str(files["neff"]), "--inputs", str(big)], caplog, "has more elements than any input of the artifact (4)")


# -- cache --stats / --clear -------------------------------------------------------------------
def test_cache_stats_and_clear_of_leftover_temporaries(files: dict, capsys: pytest.CaptureFixture,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from neuron_customcall import backend

    monkeypatch.setenv("NEURON_COMPILE_CACHE_SIZE_LIMIT", "10M")
    cache_dir = files["dir"] / "cache"
    backend.clear_memo()
    assert main(["compile", str(files["hlo"]), "-o", str(files["dir"] / "a.neff"), "--cache-dir", str(cache_dir)]) == 0
    (entry,) = cache_dir.glob("??/*.neff")
    (entry.parent / ".deadbeef.killed.tmp").write_bytes(b"a killed writer's leftovers")
    capsys.readouterr()
    assert main(["cache", "--cache-dir", str(cache_dir), "--stats"]) == 0
    out = capsys.readouterr().out
    assert f"{cache_dir}: 1 artifacts" in out and "size limit: 10.49 MB" in out
    assert "temporaries: 1" in out and "trusted: yes" in out
    cache_dir.chmod(0o777)
    assert main(["cache", "--cache-dir", str(cache_dir), "--stats"]) == 0
    assert "trusted: no: " in capsys.readouterr().out
    cache_dir.chmod(0o700)
    assert main(["cache", "--cache-dir", str(cache_dir), "--clear"]) == 0
    assert "removed 1 artifacts" in capsys.readouterr().out
    assert list(cache_dir.glob("??/*")) == [] and list(cache_dir.glob("??/.*")) == []
