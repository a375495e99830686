"""`neuron-customcall compile / run / inspect`: a JAX MLP's HLO in each of its three forms is
compiled, run from an npz and compared with JAX; inspect shows the manifest and sections; bad
inputs are refused with a message, never a traceback."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hlo
from neuron_customcall.cli import main

ROOT = Path(__file__).resolve().parents[3]


def _mlp(x, w1, b1, w2):
    return jax.nn.softmax(jax.nn.relu(x @ w1 + b1) @ w2), jnp.sum(x, axis=1)


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> dict:
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((8, 16), (16, 32), (32,), (32, 10))]
    proto = jax.jit(_mlp).lower(*args).compiler_ir("hlo").as_serialized_hlo_module_proto()
    module = hlo.load(proto)
    d = tmp_path_factory.mktemp("cli")
    files = {"proto": d / "mlp.pb", "pbtxt": d / "mlp.pbtxt", "text": d / "mlp.txt"}
    files["proto"].write_bytes(proto)
    files["pbtxt"].write_text(module.to_pbtxt())
    files["text"].write_text(module.to_text())
    expected = [np.asarray(o) for o in jax.jit(_mlp)(*args)]
    return {"dir": d, "files": files, "args": args, "expected": expected}


@pytest.mark.parametrize("form", ["proto", "pbtxt", "text"])
def test_compile_run_round_trip_matches_jax(graph: dict, form: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture) -> None:
    neff = tmp_path / "mlp.neff"
    assert main(["compile", str(graph["files"][form]), "-o", str(neff)]) == 0
    assert "wrote" in capsys.readouterr().out
    inputs, outputs = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(inputs, *graph["args"])  # positional: arr_0, arr_1, ...
    assert main(["run", str(neff), "--inputs", str(inputs), "--outputs", str(outputs)]) == 0
    with np.load(outputs, allow_pickle=False) as npz:
        got = [npz[k] for k in npz.files]
    assert len(got) == len(graph["expected"])
    for g, e in zip(got, graph["expected"]):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_inputs_by_manifest_name_and_same_artifact_from_every_form(graph: dict, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    neffs = []
    for form, path in graph["files"].items():
        neffs.append(tmp_path / f"{form}.neff")
        assert main(["compile", str(path), "-o", str(neffs[-1]), "--no-cache"]) == 0
    assert len({p.read_bytes() for p in neffs}) == 1  # three forms, one module, one artifact
    assert main(["inspect", str(neffs[0]), "--json"]) == 0
    capsys.readouterr()
    import emulator

    manifest = emulator.load_artifact(neffs[0]).manifest
    names = [i["name"] for i in manifest["inputs"]]
    np.savez(tmp_path / "named.npz", **dict(zip(names, graph["args"])))
    assert main(["run", str(neffs[0]), "--inputs", str(tmp_path / "named.npz"), "--repeat", "3"]) == 0
    out = capsys.readouterr().out
    assert "median run time" in out and manifest["outputs"][0]["name"] in out


def test_inspect_prints_manifest_sections_and_program(graph: dict, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    neff = tmp_path / "mlp.neff"
    main(["compile", str(graph["files"]["proto"]), "-o", str(neff)])
    capsys.readouterr()
    assert main(["inspect", str(neff)]) == 0
    out = capsys.readouterr().out
    for expected in ("module: jit__mlp", "hlo fingerprint: " + hlo.load(graph["files"]["proto"]).fingerprint(),
                     "compiler version:", "inputs (4):", "outputs (2):", "MANIFEST", "PROGRAM", "CONST_DATA",
                     "program:", "dot", "constants:", "kernels: 0"):
        assert expected in out, expected
    assert main(["inspect", str(neff), "--json"]) == 0
    manifest = json.loads(capsys.readouterr().out)
    assert [i["shape"] for i in manifest["inputs"]] == [[8, 16], [16, 32], [32], [32, 10]]


def test_errors_are_reported_not_raised(graph: dict, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    neff = tmp_path / "mlp.neff"
    main(["compile", str(graph["files"]["proto"]), "-o", str(neff)])
    np.savez(tmp_path / "few.npz", graph["args"][0])
    assert main(["run", str(neff), "--inputs", str(tmp_path / "few.npz")]) == 1
    assert "takes 4 inputs" in caplog.text
    np.savez(tmp_path / "shape.npz", *[a[..., :1] for a in graph["args"]])
    assert main(["run", str(neff), "--inputs", str(tmp_path / "shape.npz")]) == 1
    assert "expected shape" in caplog.text
    np.savez(tmp_path / "pickled.npz", *([np.array([{"a": 1}], dtype=object)] * 4))
    assert main(["run", str(neff), "--inputs", str(tmp_path / "pickled.npz")]) == 1
    assert "pickle" in caplog.text.lower()
    (tmp_path / "text.npz").write_text("not numpy data")
    assert main(["run", str(neff), "--inputs", str(tmp_path / "text.npz")]) == 1
    corrupt = tmp_path / "corrupt.neff"
    corrupt.write_bytes(neff.read_bytes()[:-7] + b"garbage")
    assert main(["inspect", str(corrupt)]) == 1
    assert main(["run", str(corrupt)]) == 1
    (tmp_path / "bad.txt").write_text("HloModule broken\n\nENTRY main {\n  ROOT x = f32[] nonsense(\n}\n")
    assert main(["compile", str(tmp_path / "bad.txt")]) == 1
    caplog.clear()
    assert main(["run", str(neff)]) == 1  # no --inputs: said so, with what the artifact takes
    assert "takes 4 inputs" in caplog.text and "none were given: pass --inputs FILE.npz" in caplog.text
    assert "the file has" not in caplog.text
    (tmp_path / "garbage.hlo.txt").write_text("this is not hlo at all\n")
    assert main(["compile", str(tmp_path / "garbage.hlo.txt")]) == 1  # was: "not a binary HloModuleProto"
    assert "HLO text starts with 'HloModule'" in caplog.text and "'this is not hlo at all'" in caplog.text


def test_float64_inputs_are_converted_with_a_warning(graph: dict, tmp_path: Path,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    neff = tmp_path / "mlp.neff"
    main(["compile", str(graph["files"]["proto"]), "-o", str(neff)])
    np.savez(tmp_path / "f64.npz", *[a.astype(np.float64) for a in graph["args"]])
    assert main(["run", str(neff), "--inputs", str(tmp_path / "f64.npz"), "--outputs", str(tmp_path / "o.npz")]) == 0
    assert "converting float64 to float32" in caplog.text


def test_console_script_entry_point(graph: dict, tmp_path: Path) -> None:
    neff = tmp_path / "mlp.neff"
    cmd = [sys.executable, "-m", "neuron_customcall", "compile", str(graph["files"]["text"]), "-o", str(neff)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert neff.exists()


def test_torch_xla_protobuf_text_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import torch
    import torch_xla

    dev = torch_xla.device()
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(4, 8, generator=g).to(dev), torch.randn(16, 8, generator=g).to(dev)
    outs = [torch.nn.functional.linear(x, w).relu().softmax(-1), (x * 3).sum(0)]
    ctx = torch_xla._XLAC.lowering.LoweringContext()
    ctx.build(outs)
    (tmp_path / "graph.pbtxt").write_text(ctx.hlo_text())
    params = ctx.parameter_id_tensor_mapping()
    np.savez(tmp_path / "in.npz", *[params[i].numpy() for i in range(len(params))])
    neff = tmp_path / "graph.neff"
    assert main(["compile", str(tmp_path / "graph.pbtxt"), "-o", str(neff)]) == 0
    assert main(["run", str(neff), "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz")]) == 0
    with np.load(tmp_path / "out.npz", allow_pickle=False) as npz:
        got = [npz[k] for k in npz.files]
    for g_, want in zip(got, outs):
        np.testing.assert_allclose(g_, want.cpu().numpy(), rtol=1e-5, atol=1e-6)


def test_cache_command_lists_and_clears(graph: dict, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from neuron_customcall import backend

    backend.clear_memo()  # a fresh process, as the command line always is: earlier tests compiled this graph
    cache_dir = tmp_path / "cache"
    main(["compile", str(graph["files"]["proto"]), "-o", str(tmp_path / "a.neff"), "--cache-dir", str(cache_dir)])
    main(["compile", str(graph["files"]["proto"]), "-o", str(tmp_path / "b.neff"), "--cache-dir", str(cache_dir),
          "--no-instruction-names"])
    capsys.readouterr()
    assert main(["cache", "--cache-dir", str(cache_dir)]) == 0
    assert f"{cache_dir}: 2 artifacts" in capsys.readouterr().out
    assert main(["cache", "--cache-dir", str(cache_dir), "--clear"]) == 0
    assert "removed 2 artifacts" in capsys.readouterr().out
    assert main(["cache", "--cache-dir", str(cache_dir)]) == 0
    assert ": 0 artifacts" in capsys.readouterr().out
