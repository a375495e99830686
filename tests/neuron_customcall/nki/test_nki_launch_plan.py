"""Repeated NumPy launches reuse one launch plan per (kernel, grid, argument shapes/dtypes,
statics) and one per-program setup: results are those of the general path."""

from __future__ import annotations

import numpy as np
import pytest

from emulator.kernel_exec import KernelRuntimeError, run_kernel
from neuron_customcall import nki
from neuron_customcall.nki import language as nl


@nki.jit
def scaled_add(a, b, scale):
    c = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0) * 64 + nl.arange(64)[:, None]
    j = nl.arange(a.shape[1])[None, :]
    nl.store(c[i, j], value=nl.load(a[i, j]) * scale + nl.load(b[i, j]))
    return c


@nki.jit
def in_place(x, y):
    i, j = nl.arange(x.shape[0])[:, None], nl.arange(x.shape[1])[None, :]
    nl.store(x[i, j], value=nl.load(x[i, j]) + nl.load(y[i, j]))


def test_repeated_launches_reuse_the_plan_and_follow_the_arguments():
    rng = np.random.default_rng(0)
    for _ in range(3):
        a, b = rng.random((2, 128, 32), dtype=np.float32)
        np.testing.assert_allclose(scaled_add[2](a, b, 2.0), a * 2 + b, rtol=1e-6)
    assert scaled_add.cache_size == 1 and len(scaled_add._numpy_plans) == 1
    # statics, grids and dtypes each get their own trace; equal-valued statics of another type
    # (2 vs 2.0) are another trace too, as on the general path
    a16 = a.astype(np.float16)
    np.testing.assert_allclose(scaled_add[2](a16, a16, 2), a16 * 3, rtol=1e-3)
    np.testing.assert_allclose(scaled_add[2](a, b, 3.0), a * 3 + b, rtol=1e-6)
    np.testing.assert_allclose(scaled_add[1](a[:64], b[:64], 3.0), a[:64] * 3 + b[:64], rtol=1e-6)
    assert scaled_add.cache_size == 4
    # keyword arguments take the general path, with the same results
    np.testing.assert_allclose(scaled_add[2](a, b=b, scale=2.0), a * 2 + b, rtol=1e-6)


def test_kernels_that_write_their_arguments_write_them_on_the_fast_path_too():
    x, y = np.ones((4, 8), np.float32), np.full((4, 8), 2, np.float32)
    for n in range(1, 4):
        assert in_place(x, y) is None
        np.testing.assert_array_equal(x, 1 + 2 * n)
    np.testing.assert_array_equal(y, 2)


def test_a_prepared_program_checks_each_launchs_inputs():
    traced = scaled_add.trace((np.zeros((128, 32), np.float32),) * 2 + (1.0,), {}, (2,))
    a = np.ones((128, 32), np.float32)
    np.testing.assert_array_equal(run_kernel(traced.program, [a, a])[0], 2 * a)
    with pytest.raises(KernelRuntimeError, match="traced as float32"):
        run_kernel(traced.program, [a.astype(np.float64), a])


@nki.jit
def _matmul_kernel(a, b):
    out = nl.ndarray((64, 32), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.copy(nl.matmul(nl.load(a), nl.load(b), transpose_x=True)))
    return out


@nki.jit
def _add_one_kernel(a):
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.load(a) + 1.0)
    return out


def _counting_policy(monkeypatch, module) -> list:
    """Replaces `module.blas_threads_for_run` by a policy that records each time it is entered."""
    from contextlib import contextmanager

    entered: list = []

    @contextmanager
    def policy():
        entered.append(True)
        yield

    monkeypatch.setattr(module, "blas_threads_for_run", policy)
    return entered


def test_a_kernel_with_matmuls_on_numpy_arrays_gets_the_blas_thread_policy(monkeypatch):
    """Issue 13: kernels launched on NumPy arrays run their GEMMs under the BLAS thread policy
    of graph runs (emulator/blas.py: only as many OpenBLAS threads as free cores); kernels
    without a matmul do not pay for it."""
    from emulator.kernel_exec import runner as runner_mod

    entered = _counting_policy(monkeypatch, runner_mod.blas)
    a = np.ones((16, 64), np.float32)
    b = np.ones((16, 32), np.float32)
    np.testing.assert_array_equal(_matmul_kernel(a, b), np.full((64, 32), 16.0, np.float32))
    assert entered == [True]
    _add_one_kernel(a)
    assert entered == [True]


def test_inside_a_graph_the_kernel_applies_the_policy_and_the_graph_of_small_dots_does_not(monkeypatch):
    """A `kernel` instruction keeps no graph-level BLAS policy (emulator/program/ops.py): the NKI
    kernel's runner applies it around its matmuls, so a graph whose own dots are too small to
    thread skips the policy's cost on every run."""
    import neuron_customcall.jax as nj
    from emulator import executor
    from emulator.kernel_exec import runner as runner_mod

    in_graph = _counting_policy(monkeypatch, executor)
    in_kernel = _counting_policy(monkeypatch, runner_mod.blas)
    a = np.ones((16, 64), np.float32)
    b = np.ones((16, 32), np.float32)
    w = np.full((32, 8), 0.5, np.float32)
    out = nj.jit(lambda a, b, w: _matmul_kernel(a, b) @ w + 1.0, cache=False)(a, b, w)
    np.testing.assert_array_equal(np.asarray(out), np.full((64, 8), 16.0 * 32 * 0.5 + 1.0, np.float32))
    assert in_kernel == [True] and in_graph == []
