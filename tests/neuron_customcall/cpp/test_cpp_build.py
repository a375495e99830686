"""custom_op.load / load_library: the build, its cache, its diagnostics and the signature rules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cpp_kernels import BUILD_ROOT, KERNELS, load
from emulator.gpsimd import LibraryError
from neuron_customcall import custom_op
from neuron_customcall.cpp.errors import BuildError

SHAPE_HEAD = '#include <stdint.h>\n#include <torch/torch.h>\n#include "torchneuron/register.h"\n'
COMPUTE_HEAD = "#include <stdint.h>\n#include <torch/torch.h>\n"
GOOD_COMPUTE = COMPUTE_HEAD + "torch::Tensor twice(const torch::Tensor& t) { return torch::add(t, t); }\n"


def write(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.write_text(text)
    return path


def shape_source(tmp: Path, signature: str, lib: str = "rules", extra_defs: str = "") -> Path:
    return write(tmp, "shape.cpp", SHAPE_HEAD + f"""
torch::Tensor twice_shape({signature}) {{ return torch::zeros({{1}}, torch::kFloat); }}
NEURON_LIBRARY({lib}, m) {{
    m.def("twice", &twice_shape, "twice");{extra_defs}
}}
""")


def test_library_is_named_after_name_and_ops_after_neuron_library(tmp_path: Path) -> None:
    path = custom_op.load("my_negate", [KERNELS / "negate.cpp"], [KERNELS / "negate_shape.cpp"],
                          build_directory=tmp_path)
    assert path == tmp_path / "libmy_negate.so"
    assert torch.equal(torch.ops.negate_ops.negate(torch.ones(2)), -torch.ones(2))


def test_second_load_is_served_from_the_cache_and_edits_recompile_one_file(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    shape = write(tmp_path, "shape.cpp", (KERNELS / "negate_shape.cpp").read_text())
    compute = write(tmp_path, "negate.cpp", (KERNELS / "negate.cpp").read_text())
    custom_op.load("cached", [compute], [shape], build_directory=tmp_path / "b", verbose=True)
    first = capfd.readouterr().err
    assert f" -c {compute} " in first and f" -c {shape} " in first and "-shared" in first
    assert "-include ncc_prelude.h" in first  # the precompiled device-runtime prelude ...
    assert "not used because" not in first  # ... which GCC accepts for every source
    custom_op.load("cached", [compute], [shape], build_directory=tmp_path / "b", verbose=True)
    assert " -c " not in capfd.readouterr().err
    compute.write_text(compute.read_text().replace("negate: %zu", "negated: %zu"))
    custom_op.load("cached", [compute], [shape], build_directory=tmp_path / "b", verbose=True)
    third = capfd.readouterr().err
    assert third.count(" -c ") == 1 and str(compute) in third


def test_a_changed_header_invalidates_the_objects_that_include_it(tmp_path: Path,
                                                                   capfd: pytest.CaptureFixture[str]) -> None:
    header = write(tmp_path, "sign.h", "#define SIGN -1\n")
    compute = write(tmp_path, "k.cpp", COMPUTE_HEAD + '#include "sign.h"\n'
                    "torch::Tensor twice(const torch::Tensor& t) { return torch::mul(t, torch::Scalar(2 * SIGN)); }\n")
    shape = shape_source(tmp_path, "torch::Tensor t", lib="header_dep")
    custom_op.load("hdr", [compute], [shape], build_directory=tmp_path / "b")
    header.write_text("#define SIGN 1\n")
    custom_op.load("hdr", [compute], [shape], build_directory=tmp_path / "b", verbose=True)
    assert capfd.readouterr().err.count(" -c ") == 1
    assert torch.ops.header_dep.twice(torch.ones(1)).item() == 2.0


def test_a_runtime_object_recompiled_under_its_key_relinks_every_library(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    # The runtime object is shared by all builds and recompiled under the same key when a header
    # it includes changes (runtime/gpsimd_serve.h): only the build that recompiled it saw that,
    # and every other build directory kept its library linked with the old runtime.
    from neuron_customcall.cpp import build, cache

    shape = write(tmp_path, "shape.cpp", (KERNELS / "negate_shape.cpp").read_text())
    compute = write(tmp_path, "negate.cpp", (KERNELS / "negate.cpp").read_text())
    custom_op.load("relinked", [compute], [shape], build_directory=tmp_path / "b", verbose=True)
    capfd.readouterr()
    shared_objects = build.shared_cache_root() / "objects"
    real = cache.file_digest
    monkeypatch.setattr(cache, "file_digest",
                        lambda path: ("recompiled" + str(real(path))) if Path(path).parent == shared_objects
                        else real(path))
    custom_op.load("relinked", [compute], [shape], build_directory=tmp_path / "b", verbose=True)
    err = capfd.readouterr().err
    assert " -c " not in err and "-shared" in err
    assert torch.equal(torch.ops.negate_ops.negate(torch.ones(2)), -torch.ones(2))


def test_compile_errors_point_at_the_users_file_and_line(tmp_path: Path) -> None:
    bad = write(tmp_path, "bad.cpp", COMPUTE_HEAD + "torch::Tensor twice(const torch::Tensor& t) {\n"
                "    return undefined_function(t);\n}\n")
    with pytest.raises(BuildError, match=f"{bad}:4:.*undefined_function"):
        custom_op.load("bad", [bad], [shape_source(tmp_path, "torch::Tensor t")], build_directory=tmp_path)


@pytest.mark.parametrize(
    "signature, message",
    [
        ("torch::Tensor t, float f", "float arguments are not supported, use double"),
        ("torch::Tensor t, int n", "int arguments are not supported, use int64_t"),
        ("std::vector<double> v", "std::vector arguments are not supported"),
        ("std::tuple<double, double> v", "std::tuple arguments are not supported"),
        ("torch::Tensor t, char c", "an argument must be torch::Tensor"),
    ],
)
def test_signature_rules_are_compile_errors_that_name_the_rule(tmp_path: Path, signature: str, message: str) -> None:
    shape = write(tmp_path, "shape.cpp", SHAPE_HEAD + "#include <tuple>\n#include <vector>\n" + f"""
torch::Tensor twice_shape({signature}) {{ return torch::zeros({{1}}, torch::kFloat); }}
NEURON_LIBRARY(rules, m) {{
    m.def("twice", &twice_shape, "twice");
}}
""")
    with pytest.raises(BuildError, match=message) as info:
        custom_op.load("rules", [write(tmp_path, "k.cpp", GOOD_COMPUTE)], [shape], build_directory=tmp_path)
    line = next(k for k, text in enumerate(shape.read_text().splitlines(), 1) if "m.def" in text)
    assert f"{shape}:{line}:" in str(info.value)  # the diagnostic points at the user's m.def line


def test_a_non_tensor_return_is_a_compile_error(tmp_path: Path) -> None:
    shape = write(tmp_path, "shape.cpp", SHAPE_HEAD + """
double twice_shape(torch::Tensor t) { return 1.0; }
NEURON_LIBRARY(rules, m) { m.def("twice", &twice_shape, "twice"); }
""")
    with pytest.raises(BuildError, match="a custom op must return torch::Tensor"):
        custom_op.load("rules", [write(tmp_path, "k.cpp", GOOD_COMPUTE)], [shape], build_directory=tmp_path)


def test_more_than_ten_functions_is_an_error_at_load(tmp_path: Path) -> None:
    extra = "".join(f'\n    m.def("twice{k}", &twice_shape, "twice");' for k in range(10))
    shape = shape_source(tmp_path, "torch::Tensor t", lib="too_many", extra_defs=extra)
    with pytest.raises(LibraryError, match="at most 10 functions per library"):
        custom_op.load("too_many", [write(tmp_path, "k.cpp", GOOD_COMPUTE)], [shape], build_directory=tmp_path)


def test_the_name_builtin_is_reserved(tmp_path: Path) -> None:
    compute = write(tmp_path, "k.cpp", GOOD_COMPUTE)
    with pytest.raises(BuildError, match="'builtin' is reserved"):
        custom_op.load("builtin", [compute], [shape_source(tmp_path, "torch::Tensor t")], build_directory=tmp_path)
    with pytest.raises(BuildError, match="the library name 'builtin' is reserved"):
        custom_op.load("ok", [compute], [shape_source(tmp_path, "torch::Tensor t", lib="builtin")],
                       build_directory=tmp_path)


@pytest.mark.parametrize("flag, message", [("-DSTACK_SIZE=409601", "at most 400 KB"),
                                           ("-DSTACK_SIZE=lots", "must be a number of bytes")])
def test_stack_size_is_honoured_up_to_400_kb(tmp_path: Path, flag: str, message: str) -> None:
    with pytest.raises(BuildError, match=message):
        custom_op.load("stack", [KERNELS / "negate.cpp"], [KERNELS / "negate_shape.cpp"],
                       build_directory=tmp_path, extra_cflags=[flag])


def test_a_missing_compute_function_is_an_error_at_load(tmp_path: Path) -> None:
    compute = write(tmp_path, "k.cpp", COMPUTE_HEAD + "torch::Tensor other(const torch::Tensor& t) { return t; }\n")
    with pytest.raises(LibraryError, match="compute function 'twice' is not defined"):
        custom_op.load("missing", [compute], [shape_source(tmp_path, "torch::Tensor t", lib="missing")],
                       build_directory=tmp_path)


def test_a_compute_function_must_match_its_shape_function(tmp_path: Path) -> None:
    compute = write(tmp_path, "k.cpp", COMPUTE_HEAD + "torch::Tensor twice(const torch::Tensor& t, float f) { return t; }\n")
    with pytest.raises(LibraryError, match=r"argument 1 has type float; signature rule: float arguments"):
        custom_op.load("mismatch", [compute], [shape_source(tmp_path, "torch::Tensor t, double d", lib="mismatch")],
                       build_directory=tmp_path)


def test_load_library_in_another_process() -> None:
    path = load("relu")
    code = (
        "import torch\n"
        "from neuron_customcall import custom_op\n"
        f"custom_op.load_library({str(path)!r})\n"
        "x = torch.tensor([[-1.0, 2.0], [3.0, -4.0]])\n"
        "print(torch.ops.relu_ops.relu_tcm(x).tolist())\n"
    )
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[[0.0, 2.0], [3.0, 0.0]]"


def test_shared_build_root_is_reused() -> None:
    assert (load("negate").parent / ".ncc-objects").is_dir()
    assert load("negate").parent.parent == BUILD_ROOT


def test_stale_precompiled_preludes_are_pruned(tmp_path: Path) -> None:
    from neuron_customcall.cpp import prelude

    pch = tmp_path / "pch"
    for k in range(prelude.KEEP + 3):
        (pch / f"p{k}").mkdir(parents=True)
        old = 10_000 + k  # seconds since the epoch: all long unused, p0 the oldest
        os.utime(pch / f"p{k}", (old, old))
    (pch / "fresh").mkdir()
    prelude._prune(pch)
    left = sorted(p.name for p in pch.iterdir())
    assert "fresh" in left and len(left) == prelude.KEEP and "p0" not in left


def test_the_device_headers_are_warning_free(tmp_path: Path) -> None:
    path = custom_op.load("strict", [KERNELS / "negate.cpp"], [KERNELS / "negate_shape.cpp"],
                          build_directory=tmp_path, extra_cflags=["-Wall", "-Wextra", "-Werror"])
    assert path.exists()


def test_accessor_kernels_compile_warning_free(tmp_path: Path) -> None:
    """The accessors' inline fast paths (always_inline, per-translation-unit counts) warn nothing."""
    srcs = [KERNELS / "relu.cpp", KERNELS / "relu_stream.cpp", KERNELS / "relu_tcm.cpp"]
    path = custom_op.load("strict_relu", srcs, [KERNELS / "relu_shape.cpp"], build_directory=tmp_path,
                          extra_cflags=["-Wall", "-Wextra", "-Wshadow", "-Werror",
                                        "-Wno-unused-parameter"])  # relu_shape.cpp's own
    assert path.exists()


def test_tuning_flags_are_used_where_the_compiler_takes_them(tmp_path: Path) -> None:
    from neuron_customcall.cpp import build, compiler

    assert not compiler.accepts(compiler.compiler(), "-mno-such-option-anywhere")
    accepted = tuple(f for f in compiler.TUNING_FLAGS if compiler.accepts(compiler.compiler(), f))
    assert compiler.tuning_flags() == accepted
    if "g++" in Path(compiler.compiler()).name and os.uname().machine == "x86_64":
        assert accepted == ("-mbranch-cost=5",)
    request = build.make_request("tuned", [KERNELS / "relu.cpp"], [KERNELS / "relu_shape.cpp"], tmp_path,
                                 False, False, ["-DUSER_FLAG"])
    assert request.flags[-2:] == ("-DNCC_MULTICORE=0", "-DUSER_FLAG")  # the user's flags come last
    assert set(accepted) <= set(request.flags)


def test_checkouts_with_the_same_headers_do_not_share_a_precompiled_prelude(tmp_path: Path) -> None:
    """Regression: the prelude's key held the headers' content but not their directory, so a
    second checkout reused the first one's .gch and GCC's diagnostics named the first checkout's
    header paths (which may be gone)."""
    from neuron_customcall.cpp import prelude
    from emulator.gpsimd.sources import INCLUDE_DIR

    flags, identity = ("-O2",), "g++ 12"
    here = prelude.key(flags, identity)
    assert here == prelude.key(flags, identity, INCLUDE_DIR)
    other = tmp_path / "other-checkout" / "include"
    other.mkdir(parents=True)
    assert prelude.key(flags, identity, other) != here


class _Terminal:
    """A stand-in for a terminal's standard error (isatty), keeping what was written."""

    def __init__(self) -> None:
        self.text = ""

    def isatty(self) -> bool:
        return True

    def write(self, s: str) -> int:
        self.text += s
        return len(s)

    def flush(self) -> None:
        pass


def test_a_build_shows_its_progress_on_a_terminal_and_nothing_when_cached(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 17: a progress display for C++ builds started from the library (g++ takes seconds
    per source); on a terminal k/n as sources finish, elsewhere an INFO log line."""
    import logging

    shape = write(tmp_path, "shape.cpp", (KERNELS / "negate_shape.cpp").read_text())
    compute = write(tmp_path, "negate.cpp", (KERNELS / "negate.cpp").read_text())
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    custom_op.load("shown", [compute], [shape], build_directory=tmp_path / "b")
    assert "building libshown.so ..." in term.text
    assert "negate.cpp" in term.text and "shape.cpp" in term.text
    assert "/2 (" in term.text or "/3 (" in term.text or "/4 (" in term.text
    assert term.text.rstrip().splitlines()[-1].split("\r")[-1].endswith("ms")
    term.text = ""
    custom_op.load("shown", [compute], [shape], build_directory=tmp_path / "b")
    assert term.text == ""  # everything cached: no display
    monkeypatch.undo()
    compute.write_text(compute.read_text() + "\n// edited\n")
    with caplog.at_level(logging.INFO, logger="neuron_customcall.progress"):
        custom_op.load("shown", [compute], [shape], build_directory=tmp_path / "b")
    assert "building libshown.so: done in" in caplog.text
