"""Limits on what a module, artifact or kernel may ask of the machine (issue 16): an HLO
while(true) stops after NEURON_EMULATOR_WHILE_TIMEOUT, an NKI grid beyond
NEURON_EMULATOR_MAX_GRID_PROGRAMS is refused, the compile-time memory budget
(NEURON_CUSTOMCALL_MEMORY_LIMIT) refuses f32[100000,100000] iota(), and malformed settings are
named (NEURON_CUSTOMCALL_GPSIMD_TIMEOUT=abc no longer breaks the import)."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import emulator
import hlo
from emulator.limits import MAX_GRID_ENV, WHILE_TIMEOUT_ENV, LimitSettingError, positive_setting
from neuron_customcall.compiler import CompileError, compile_module
from neuron_customcall.compiler.memory import MEMORY_LIMIT_ENV

ROOT = Path(__file__).resolve().parents[2]

FOREVER = """HloModule w

cond {
  p = s32[] parameter(0)
  ROOT t = pred[] constant(true)
}

body {
  p = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT a = s32[] add(p, one)
}

ENTRY e {
  x = s32[] parameter(0)
  ROOT w = s32[] while(x), condition=cond, body=body
}
"""


def _within(fn, seconds: float):
    """fn() in a thread; fails the test (instead of hanging it) if it does not finish in time."""
    box: list = []

    def target() -> None:
        try:
            box.append(("ok", fn()))
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box.append(("err", e))
    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds} s"
    return box[0]


def test_while_true_stops_with_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WHILE_TIMEOUT_ENV, "0.3")
    exe = emulator.load_artifact(compile_module(hlo.load(FOREVER)))
    kind, err = _within(lambda: exe.run([np.int32(0)]), 60)  # today: runs forever
    assert kind == "err" and isinstance(err, emulator.EmulatorError)
    assert "while loop 'w' still running after" in str(err) and WHILE_TIMEOUT_ENV in str(err)


def test_finite_loops_are_untouched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WHILE_TIMEOUT_ENV, "30")
    text = FOREVER.replace("ROOT t = pred[] constant(true)",
                           "n = s32[] constant(5000)\n  ROOT t = pred[] compare(p, n), direction=LT")
    exe = emulator.load_artifact(compile_module(hlo.load(text)))
    assert int(exe.run([np.int32(7)])[0]) == 5000


@pytest.mark.parametrize("value", ["abc", "-1", "0", "nan", "inf"])
def test_malformed_limit_settings_are_named(value: str) -> None:
    with pytest.raises(LimitSettingError, match=f"{WHILE_TIMEOUT_ENV}="):
        positive_setting(WHILE_TIMEOUT_ENV, 1.0, environ={WHILE_TIMEOUT_ENV: value})


def test_gpsimd_timeout_abc_at_import_warns_and_keeps_the_default() -> None:
    code = "import emulator.gpsimd.runner as r; print(r.DEFAULT_TIMEOUT, r.DEFAULT_SHAPE_TIMEOUT)"
    env = {"NEURON_CUSTOMCALL_GPSIMD_TIMEOUT": "abc", "NEURON_CUSTOMCALL_GPSIMD_SHAPE_TIMEOUT": "7",
           "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr  # today: ValueError at import
    assert done.stdout.split() == ["300.0", "7.0"]
    assert "NEURON_CUSTOMCALL_GPSIMD_TIMEOUT='abc' is not a positive number" in done.stderr


# -- NKI grids ---------------------------------------------------------------------------------
def _copy_kernel():
    from neuron_customcall import nki
    from neuron_customcall.nki import language as nl

    @nki.jit
    def copy(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a))
        return out
    return copy


def test_a_grid_of_two_to_the_31_programs_is_refused_at_once() -> None:
    from emulator.kernel_exec.errors import KernelRuntimeError

    a = np.ones((4, 4), np.float32)
    start = time.monotonic()
    kind, err = _within(lambda: _copy_kernel()[2 ** 31](a), 120)
    assert kind == "err" and isinstance(err, KernelRuntimeError), err
    assert "launches 2147483648 programs" in str(err) and MAX_GRID_ENV in str(err)
    assert time.monotonic() - start < 60


def test_the_grid_limit_is_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    from emulator.kernel_exec.errors import KernelRuntimeError

    a = np.ones((4, 4), np.float32)
    monkeypatch.setenv(MAX_GRID_ENV, "2")
    with pytest.raises(KernelRuntimeError, match="launches 3 programs, more than 2"):
        _copy_kernel()[3](a)
    monkeypatch.setenv(MAX_GRID_ENV, "3")
    np.testing.assert_array_equal(_copy_kernel()[1](a), a)


def test_serialised_kernels_with_huge_grids_are_invalid() -> None:
    from emulator.kernel_ir.validate import KernelIRValidationError, validate

    kernel = _copy_kernel()
    ir = kernel.trace([np.ones((4, 4), np.float32)], {}, (2 ** 20, 2 ** 11)).ir
    with pytest.raises(KernelIRValidationError, match="launches 2147483648 programs"):
        validate(ir)


# -- memory budget -----------------------------------------------------------------------------
IOTA = "HloModule m\n\nENTRY e {\n  ROOT i = f32[100000,100000] iota(), iota_dimension=0\n}\n"
ADD = "HloModule m\n\nENTRY e {\n  p = f32[1024] parameter(0)\n  ROOT a = f32[1024] add(p, p)\n}\n"


def test_a_module_larger_than_memory_is_refused_at_compile_time() -> None:
    with pytest.raises(CompileError, match=r"needs at least 37\.3 GiB of memory at once .*" + MEMORY_LIMIT_ENV):
        compile_module(hlo.load(IOTA))  # today: compiles, then a raw MemoryError at run


@pytest.mark.parametrize("lhs, window, out, gib", [
    ("f32[1,1,4,4]", "size=1x1 pad=60000_60000x60000_60000", "f32[1,1,120004,120004]", "53.6"),  # a huge result
    ("f32[1,1,100000,100000]", "size=2x2 stride=100000x100000", "f32[1,1,1,1]", "37.3"),     # a huge input
])
def test_a_convolution_larger_than_memory_is_refused_at_compile_time(lhs: str, window: str, out: str, gib: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 15: a 50 GiB convolution failed with a raw MemoryError; the budget names it up front
    (a 16 GiB limit, so that the test does not depend on the host's memory)."""
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "16G")
    text = (f"HloModule m\nENTRY e {{\n  x = {lhs} parameter(0)\n  k = f32[1,1,{window[5]},{window[5]}] parameter(1)\n"
            f"  ROOT c = {out} convolution(x, k), window={{{window}}}, dim_labels=bf01_oi01->bf01\n}}\n")
    with pytest.raises(CompileError, match=rf"needs at least {gib} GiB of memory at once \(at c in e"):
        compile_module(hlo.load(text))


def test_a_broadcast_output_is_counted_in_full() -> None:
    """Regression: a broadcast is a view inside the program, so f32[] -> f32[1e5,1e5,100] as the
    result compiled and failed with a raw MemoryError when the output was materialised."""
    text = ("HloModule m\nENTRY e {\n  s = f32[] parameter(0)\n  b = f32[100000,100000,100] broadcast(s), "
            "dimensions={}\n  ROOT t = (f32[], f32[100000,100000,100]) tuple(s, b)\n}\n")
    with pytest.raises(CompileError, match=r"needs at least 3725\.3 GiB of memory at once \(at b in e"):
        compile_module(hlo.load(text))
    inner = ("HloModule m\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT z = f32[] add(x, y)\n}\n"
             "ENTRY e {\n  s = f32[] parameter(0)\n  b = f32[100000,100000] broadcast(s), "
             "dimensions={}\n  ROOT r = f32[] reduce(b, s), dimensions={0,1}, to_apply=add\n}\n")
    compile_module(hlo.load(inner))  # a broadcast used inside the program stays a view


@pytest.mark.parametrize("limit, ok", [("4K", False), ("8K", True), ("0", True)])
def test_the_memory_limit_is_configurable(limit: str, ok: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MEMORY_LIMIT_ENV, limit)  # parameter 4 KiB + result 4 KiB
    if ok:
        compile_module(hlo.load(ADD))
    else:
        with pytest.raises(CompileError, match="needs at least 8.0 KiB"):
            compile_module(hlo.load(ADD))


def test_a_malformed_memory_limit_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "plenty")
    with pytest.raises(CompileError, match=f"{MEMORY_LIMIT_ENV}='plenty' is not a size"):
        compile_module(hlo.load(ADD))
