"""`neuron_customcall.nki.debug.watch`: tiles handed to the user while a kernel runs (issue 17,
"a breakpoint hook or a step mode that hands tiles to the user as NumPy arrays")."""
from __future__ import annotations

import inspect
import threading

import numpy as np
import pytest

from emulator.kernel_exec import parallel
from neuron_customcall import nki
from neuron_customcall.nki import debug
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import NKIError
from tests.neuron_customcall.nki.test_nki_kernels import softmax_kernel


@nki.jit
def affine(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    u = nl.multiply(t, 3.0)
    v = nl.add(u, 1.0)
    nl.store(out, value=v)
    return out


def _line_of(func, text: str) -> int:
    lines, first = inspect.getsourcelines(func)
    return first + next(i for i, line in enumerate(lines) if text in line)


@nki.jit
def rows(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 2):
        t = nl.load(a[i * 2:(i + 1) * 2, :])
        nl.store(out[i * 2:(i + 1) * 2, :], value=nl.exp(t))
    return out


def test_a_recorded_watch_sees_every_instruction_with_its_values() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with debug.watch(kernel=affine) as steps:
        out = affine(x)
    np.testing.assert_array_equal(out, 3 * x + 1)  # watching changes nothing
    assert [s.op for s in steps] == ["load", "tensor_scalar", "tensor_scalar", "store"]
    np.testing.assert_array_equal(steps[0].value(), x)
    np.testing.assert_array_equal(steps[1].value(), 3 * x)
    np.testing.assert_array_equal(steps[2].value(), 3 * x + 1)
    # the operands as they were before the instruction
    (text, vals), = steps[2].inputs
    assert text.startswith(steps[1].dst)
    np.testing.assert_array_equal(vals[0][1], 3 * x)
    assert steps[1].line == _line_of(affine.func, "nl.multiply")
    assert steps[1].where.endswith(f"test_nki_debug_watch.py:{steps[1].line}")
    assert "multiply" in steps[1].text


def test_values_are_copies_the_user_may_keep_and_change() -> None:
    x = np.ones((2, 3), np.float32)
    with debug.watch(kernel=affine, op="tensor_scalar") as steps:
        affine(x)
    steps[0].value()[...] = 99
    with debug.watch(kernel=affine, op="tensor_scalar") as again:
        out = affine(x)
    np.testing.assert_array_equal(out, 4 * x)
    np.testing.assert_array_equal(again[0].value(), 3 * x)


def test_a_line_filter_and_a_breakpoint_callback_per_program_of_a_grid(monkeypatch) -> None:
    monkeypatch.setattr(parallel, "MIN_PARALLEL_BYTES", 0)  # would split over host threads
    monkeypatch.setenv("NEURON_EMULATOR_THREADS", "2")
    x = np.random.default_rng(1).standard_normal((512, 300)).astype(np.float32)
    expected = softmax_kernel[4](x)
    seen: list = []
    threads: set[int] = set()

    def stop(step):
        threads.add(threading.get_ident())
        seen.append(step)

    first = min(ins.loc.line for ins in _instructions(softmax_kernel, x) if ins.op == "load")
    with debug.watch(stop, kernel="softmax_kernel", line=first):
        out = softmax_kernel[4](x)
    np.testing.assert_array_equal(out, expected)
    assert seen and all(s.line == first for s in seen)
    programs = sorted(idx["p0"] for s in seen for idx, _ in s.values)
    assert programs == [0, 1, 2, 3]
    for s in seen:
        for idx, value in s.values:
            np.testing.assert_array_equal(value, x[idx["p0"] * 128:(idx["p0"] + 1) * 128])
    assert len(threads) == 1


def _instructions(kernel, *args):
    from emulator.kernel_ir.ir import walk_instructions
    return list(walk_instructions(nki.trace_kernel(kernel, list(args), grid=(4,)).ir.body))


def test_loop_iterations_are_labelled_like_device_print() -> None:
    x = np.arange(12, dtype=np.float32).reshape(6, 2) / 10
    with debug.watch(kernel=rows, op="activation") as steps:
        rows(x)
    labels = sorted(tuple(sorted(idx.items())) for s in steps for idx, _ in s.values)
    loop_var = [k for k in dict(labels[0]) if k != "p0"]
    assert len(loop_var) == 1 and [dict(l)[loop_var[0]] for l in labels] == [0, 1, 2]
    for s in steps:
        for idx, value in s.values:
            i = idx[loop_var[0]]
            np.testing.assert_allclose(value, np.exp(x[2 * i:2 * i + 2]), rtol=1e-6)


def test_other_kernels_are_not_watched_and_the_watch_ends_with_the_block() -> None:
    x = np.ones((2, 3), np.float32)
    with debug.watch(kernel=rows) as steps:
        affine(x)
    assert steps == []
    with debug.watch() as everything:
        pass
    affine(x)
    assert everything == []


def test_an_error_in_the_callback_reaches_the_caller_unchanged() -> None:
    class Found(Exception):
        pass

    def stop(step):
        if step.op == "store":
            raise Found(step.where)

    with pytest.raises(Found):
        with debug.watch(stop, kernel=affine):
            affine(np.ones((2, 3), np.float32))


def test_value_names_the_programs_when_the_indices_do_not_pick_one() -> None:
    x = np.zeros((512, 300), np.float32)
    with debug.watch(kernel=softmax_kernel, op="load") as steps:
        softmax_kernel[4](x)
    step = next(s for s in steps if len(s.values) > 1)
    with pytest.raises(KeyError, match="p0=0"):
        step.value()
    assert step.value(p0=3).shape == step.values[3][1].shape


@pytest.mark.parametrize("kwargs, match", [
    ({"line": 0}, "positive source line"),
    ({"line": [12, "x"]}, "positive source line"),
    ({"op": 3}, "instruction names"),
    ({"kernel": 3.5}, "kernel= takes"),
])
def test_bad_arguments_are_named(kwargs, match) -> None:
    with pytest.raises(NKIError, match=match):
        with debug.watch(**kwargs):
            pass


def test_a_kernel_inside_a_jax_graph_is_watched() -> None:
    import jax

    from tests.neuron_customcall.kernels.seed_kernels import nki_tensor_add

    a = np.arange(256 * 1024, dtype=np.float32).reshape(256, 1024) / 1e3
    with debug.watch(op="store") as steps:
        out = jax.jit(lambda a, b: nki_tensor_add(a, b) * 2)(a, a)
        out.block_until_ready()  # JAX dispatches asynchronously: the kernel runs before this
    np.testing.assert_allclose(np.asarray(out), 4 * a, rtol=1e-6)
    assert steps, "the kernel run by the graph was not watched"
    assert {s.kernel for s in steps} == {"nki_tensor_add_kernel_"}


def test_a_long_recording_keeps_the_newest_steps(monkeypatch) -> None:
    monkeypatch.setattr(debug, "MAX_RECORDED_STEPS", 2)
    with debug.watch(kernel=affine) as steps:
        affine(np.ones((2, 3), np.float32))
    assert [s.op for s in steps] == ["tensor_scalar", "store"] and steps.dropped == 2
