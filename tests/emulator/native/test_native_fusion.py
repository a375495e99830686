"""Fused native regions built with g++: the same bits as NumPy for every fusible op and type
(special values included), NumPy whenever an input is not what the code was compiled for, the
swap of a hot program, and every failure (no compiler, a library altered in the cache, a cache
directory others can write) a logged fallback to NumPy, never a wrong answer."""
from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from emulator import load_artifact
from emulator.artifact import ArtifactContents, write_artifact
from emulator.native import policy
from emulator.program import Computation, Instruction, Program

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")

SHAPE = [5, 7]


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Every test builds into a cache of its own (the private base directory moved), as a new
    process would (no module loaded yet)."""
    import emulator.native.build as build
    monkeypatch.setattr(build, "_loaded", {})
    base = tmp_path / "private"
    base.mkdir(mode=0o700)
    monkeypatch.setenv("NEURON_CUSTOMCALL_PRIVATE_DIR", str(base))
    monkeypatch.delenv(policy.AFTER_ENV, raising=False)
    return base / "fused"


def _t(dtype, shape=SHAPE):
    return [dtype, list(shape)]


def _manifest(inputs, outputs):
    io = lambda ts: [{"name": f"v{k}", "dtype": t[0], "shape": t[1]} for k, t in enumerate(ts)]  # noqa: E731
    return {"format": "neuron-customcall-neff", "module_name": "t", "hlo_fingerprint": "", "compiler_version": "t",
            "flags": {}, "aliases": [], "inputs": io(inputs), "outputs": io(outputs)}


def _program(dtype: str, ops: list[tuple[str, dict, list[int], str]]):
    """A program over x (slot 0), y (slot 1), p (slot 2, pred), r (slot 3, a row) and s (slot 4,
    a scalar): x and y are first combined with broadcasts of r and s, then every op of `ops`
    (name, attributes, operand slots, result dtype) gives an output."""
    t, pred = _t(dtype), _t("pred")
    row, scalar = _t(dtype, SHAPE[1:]), _t(dtype, [])
    insts = [Instruction("broadcast", 5, [3], t, {"dims": [1]}, name="br"),
             Instruction("broadcast", 6, [4], t, {"dims": []}, name="bs"),
             Instruction("add", 7, [0, 5], t, name="xr") if dtype != "pred" else
             Instruction("and", 7, [0, 5], t, name="xr"),
             Instruction("select", 8, [2, 1, 6], t, name="ys")]
    outs = []
    for k, (op, attrs, ins, out_dtype) in enumerate(ops):
        slot = 9 + k
        insts.append(Instruction(op, slot, ins, _t(out_dtype), attrs, name=f"{op}{k}"))
        outs.append(slot)
    types = [t, t, pred, row, scalar]
    out_types = [_t(d) for *_, d in ops]
    result = 9 + len(ops)
    insts.append(Instruction("tuple", result, outs, ["tuple", out_types], name="t"))
    comp = Computation("main", result + 1, [0, 1, 2, 3, 4], types, insts, result, ["tuple", out_types])
    return write_artifact(ArtifactContents(_manifest(types, out_types), Program([comp], 0), []))


def _run_both(artifact, inputs, monkeypatch):
    monkeypatch.setenv(policy.MODE_ENV, "off")
    plain = load_artifact(artifact)
    monkeypatch.setenv(policy.MODE_ENV, "now")
    fused = load_artifact(artifact)
    assert fused.native_regions == 1 and not plain.native
    return plain.run([np.copy(a) for a in inputs]), fused.run([np.copy(a) for a in inputs])


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.reshape(-1).view(np.dtype(f"u{a.dtype.itemsize}"))


def _assert_same_bits(expected, got):
    for k, (e, g) in enumerate(zip(expected, got)):
        assert e.dtype == g.dtype and e.shape == g.shape, k
        np.testing.assert_array_equal(_bits(e), _bits(g), err_msg=f"output {k}")


_SPECIAL = {"f32": np.float32, "f64": np.float64}


def _floats(dtype, rng):
    ft = _SPECIAL[dtype]
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-310, 1.0, -1.0, 3e38, 0.5, 2.0], ft)
    x = rng.standard_normal(SHAPE).astype(ft) * ft(100)
    y = rng.standard_normal(SHAPE).astype(ft)
    x.reshape(-1)[:len(specials)] = specials
    y.reshape(-1)[5:5 + len(specials)] = specials[::-1]
    y.reshape(-1)[::9] = x.reshape(-1)[::9]  # some equal pairs (ties of maximum and compare)
    return x, y


def _cmp(direction):
    return {"direction": direction, "total_order": False}


_FLOAT_OPS = [("add", {}, [7, 8]), ("subtract", {}, [7, 8]), ("multiply", {}, [7, 8]), ("divide", {}, [7, 8]),
              ("negate", {}, [7]), ("abs", {}, [8]), ("select", {}, [2, 7, 8])]


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_float_ops_give_numpys_bits(dtype, monkeypatch):
    ops = [(op, attrs, ins, dtype) for op, attrs, ins in _FLOAT_OPS]
    ops += [("compare", _cmp(d), [7, 8], "pred") for d in ("EQ", "NE", "LT", "LE", "GT", "GE")]
    ops += [("convert", {}, [7], d) for d in ("s32", "u8", "s64", "pred", "f32" if dtype == "f64" else "f64")]
    rng = np.random.default_rng(1)
    x, y = _floats(dtype, rng)
    ft = _SPECIAL[dtype]
    x.reshape(-1)[-4:] = [3e9, -3e9, 255.9, -0.9]  # saturating conversions
    p = rng.random(SHAPE) < 0.5
    r = rng.standard_normal(SHAPE[1:]).astype(ft)
    plain, fused = _run_both(_program(dtype, ops), [x, y, p, r, ft(-0.0)], monkeypatch)
    _assert_same_bits(plain, fused)


@pytest.mark.parametrize("dtype", ["s32", "u8", "s64", "pred"])
def test_integer_and_predicate_ops_give_numpys_bits(dtype, monkeypatch):
    if dtype == "pred":
        ops = [(op, {}, [7, 8], "pred") for op in ("and", "or", "xor")] + [("not", {}, [7], "pred")]
        ops += [("compare", _cmp(d), [7, 8], "pred") for d in ("EQ", "LT")]
        ops += [("convert", {}, [7], d) for d in ("f32", "s32")] + [("select", {}, [7, 8, 0], "pred")]
    else:
        ops = [(op, {}, [7, 8], dtype) for op in ("add", "subtract", "multiply", "maximum", "minimum", "and",
                                                   "or", "xor")]
        ops += [("negate", {}, [7], dtype), ("not", {}, [8], dtype)]
        ops += [("compare", _cmp(d), [7, 8], "pred") for d in ("NE", "LE", "GT")]
        ops += [("convert", {}, [7], d) for d in ("f32", "f64", "s8", "u16", "pred")]
    rng = np.random.default_rng(2)
    dt = np.dtype({"s32": np.int32, "u8": np.uint8, "s64": np.int64, "pred": np.bool_}[dtype])
    if dt == np.bool_:
        x, y, r, s = rng.random(SHAPE) < 0.5, rng.random(SHAPE) < 0.5, rng.random(SHAPE[1:]) < 0.5, np.True_
    else:
        info = np.iinfo(dt)
        x = rng.integers(info.min, info.max, SHAPE, dtype=dt, endpoint=True)
        y = rng.integers(info.min, info.max, SHAPE, dtype=dt, endpoint=True)
        x.reshape(-1)[:2] = [info.min, info.max]  # wrapping arithmetic
        r, s = rng.integers(info.min, info.max, SHAPE[1:], dtype=dt), dt.type(info.max)
    p = rng.random(SHAPE) < 0.5
    plain, fused = _run_both(_program(dtype, ops), [x, y, p, r, s], monkeypatch)
    _assert_same_bits(plain, fused)


def _small_program():
    return _program("f32", [("multiply", {}, [7, 8], "f32"), ("compare", _cmp("GT"), [7, 8], "pred")])


def _small_inputs(seed=3):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(SHAPE).astype(np.float32), rng.standard_normal(SHAPE).astype(np.float32),
            rng.random(SHAPE) < 0.5, rng.standard_normal(SHAPE[1:]).astype(np.float32), np.float32(2)]


def test_an_input_in_another_layout_is_read_from_a_copy(monkeypatch):
    """A Fortran-ordered input (not C-contiguous) reaches the region: same bits."""
    inputs = _small_inputs()
    plain, _ = _run_both(_small_program(), inputs, monkeypatch)
    fused = load_artifact(_small_program())
    assert fused.native
    x = np.asfortranarray(inputs[0])  # the same values, another layout
    assert not x.flags.c_contiguous
    _assert_same_bits(plain, fused.run([x, *inputs[1:]]))


def test_an_input_the_code_was_not_compiled_for_goes_to_the_numpy_form(monkeypatch):
    """The region's function, given an input of another dtype or shape, returns what its
    fallback (first argument) returns for the same inputs."""
    monkeypatch.setenv(policy.MODE_ENV, "now")
    fused = load_artifact(_small_program())
    env = fused._entry.__globals__
    (name,) = [k for k in env if k.startswith("rn")]
    native = env[name]
    calls = []

    def fallback(*inputs):
        calls.append(inputs)
        return "numpy's answer"
    x, y, p, r, s = _small_inputs()
    good = native(fallback, r, s, x, p, y)  # the inputs in the order the region first reads them
    assert not calls and isinstance(good, tuple)
    for odd in ([r.astype(np.float64), s, x, p, y], [r, s, x[:2], p, y], [r, np.float64(2), x, p, y],
                [r, s, x.tolist(), p, y]):
        assert native(fallback, *odd) == "numpy's answer"
    assert len(calls) == 4


def test_a_hot_program_is_swapped_in_the_background_with_the_same_results(monkeypatch, private_cache):
    monkeypatch.setenv(policy.MODE_ENV, "auto")
    monkeypatch.setenv(policy.AFTER_ENV, "2")
    exe = load_artifact(_small_program())
    inputs = _small_inputs()
    before = [exe.run(inputs) for _ in range(2)]
    deadline = time.monotonic() + 120
    while not exe.native and time.monotonic() < deadline:
        time.sleep(0.05)
    assert exe.native
    _assert_same_bits(before[0], exe.run(inputs))
    assert len(list(private_cache.glob("*.so"))) == 1


def test_no_compiler_leaves_the_program_on_numpy_with_the_reason_logged(monkeypatch, caplog):
    monkeypatch.setenv("CXX", "/nonexistent/g++")
    import emulator.native.build as build
    monkeypatch.setattr(build, "_identity", [])
    monkeypatch.setenv(policy.MODE_ENV, "now")
    with caplog.at_level(logging.WARNING, logger="emulator.executor"):
        exe = load_artifact(_small_program())
    assert not exe.native
    assert "fused native code not used" in caplog.text and "nonexistent" in caplog.text
    monkeypatch.setenv(policy.MODE_ENV, "off")
    _assert_same_bits(load_artifact(_small_program()).run(_small_inputs()), exe.run(_small_inputs()))


def test_a_library_altered_in_the_cache_is_not_loaded_but_rebuilt(monkeypatch, caplog, private_cache):
    import emulator.native.build as build
    monkeypatch.setenv(policy.MODE_ENV, "now")
    load_artifact(_small_program())
    (library,) = private_cache.glob("*.so")
    image = bytearray(library.read_bytes())
    image[len(image) // 2] ^= 0xFF
    altered = library.with_name("altered")
    altered.write_bytes(bytes(image))
    os.replace(altered, library)  # a new file: the loaded library's mapped pages stay intact
    monkeypatch.setattr(build, "_loaded", {})  # a new process: nothing loaded yet
    with caplog.at_level(logging.WARNING, logger="emulator.native.build"):
        exe = load_artifact(_small_program())
    assert "does not hash to its recorded digest" in caplog.text
    assert exe.native
    assert library.read_bytes() != bytes(image)  # rebuilt
    monkeypatch.setenv(policy.MODE_ENV, "off")
    _assert_same_bits(load_artifact(_small_program()).run(_small_inputs()), exe.run(_small_inputs()))


def test_a_cache_directory_others_can_write_is_refused(monkeypatch, caplog, private_cache):
    private_cache.mkdir(mode=0o700)
    os.chmod(private_cache, 0o777)
    monkeypatch.setenv(policy.MODE_ENV, "now")
    with caplog.at_level(logging.WARNING, logger="emulator.executor"):
        exe = load_artifact(_small_program())
    assert not exe.native
    assert "open to other users" in caplog.text
    assert not list(Path(private_cache).glob("*.so"))


def test_temporaries_of_a_cut_short_build_are_removed_when_stale(monkeypatch, private_cache):
    import emulator.native.build as build
    private_cache.mkdir(mode=0o700)
    stale, fresh = private_cache / ".tmp-old.so", private_cache / ".tmp-new.cc"
    stale.write_bytes(b"x")
    fresh.write_bytes(b"y")
    old = time.time() - build.STALE_SECONDS - 60
    os.utime(stale, (old, old))
    build.cache_directory()
    assert not stale.exists() and fresh.exists()
