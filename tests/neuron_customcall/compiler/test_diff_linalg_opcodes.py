"""HLO's linear-algebra opcodes, cholesky and triangular-solve, against XLA:CPU (jaxlib) on the
same modules: every option combination, batches, each of the four LAPACK types, the other
triangle (zero after cholesky, never read by triangular-solve), matrices that are not positive
definite (all NaN on XLA:CPU) and shapes XLA refuses."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import hlo
from neuron_customcall.compiler import CompileError, compile_module
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable
from tests.neuron_customcall.compiler.ours import assert_close, compile_proto

_TYPES = {"f32": np.float32, "f64": np.float64, "c64": np.complex64, "c128": np.complex128}
_TOL = {"f32": 2e-4, "c64": 2e-4, "f64": 1e-10, "c128": 1e-10}


def _matrix(rng: np.random.Generator, shape: tuple[int, ...], npdt: type) -> np.ndarray:
    m = rng.standard_normal(shape)
    if np.dtype(npdt).kind == "c":
        m = m + 1j * rng.standard_normal(shape)
    return m.astype(npdt)


def _spd(rng: np.random.Generator, batch: tuple[int, ...], n: int, npdt: type) -> np.ndarray:
    """Hermitian positive definite matrices whose other triangle is garbage, which XLA ignores."""
    m = _matrix(rng, batch + (n, n), npdt)
    spd = m @ np.conj(np.swapaxes(m, -1, -2)) + n * np.eye(n, dtype=npdt)
    junk = _matrix(rng, batch + (n, n), npdt) * 100
    return spd, junk


def _both(text: str, inputs: list[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    proto = hlo.load(text).to_bytes()
    return compile_proto(proto).run(inputs), XlaCpuExecutable(proto).run(inputs)


@pytest.mark.parametrize("ty", sorted(_TYPES))
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_cholesky_matches_xla_cpu(ty: str, lower: bool, batch: tuple[int, ...]) -> None:
    rng = np.random.default_rng(len(batch) * 10 + lower)
    n = 5
    spd, junk = _spd(rng, batch, n, _TYPES[ty])
    keep = np.tril(np.ones((n, n), bool)) if lower else np.triu(np.ones((n, n), bool))
    a = np.where(keep, spd, junk)  # only the `lower` triangle holds the matrix
    dims = ",".join(map(str, batch + (n, n)))
    text = f"HloModule m\nENTRY e {{\n a = {ty}[{dims}] parameter(0)\n" \
           f" ROOT r = {ty}[{dims}] cholesky(a), lower={str(lower).lower()}\n}}"
    ours, ref = _both(text, [a])
    assert_close(ours, ref, rtol=_TOL[ty], atol=_TOL[ty])
    assert not np.any(ours[0][..., ~keep]), "the other triangle is zero, as on XLA:CPU"


def test_cholesky_of_a_matrix_that_is_not_positive_definite_is_all_nan_like_xla_cpu() -> None:
    good = np.array([[4, 2], [2, 3]], np.float32)
    bad = np.array([[1, 2], [2, 1]], np.float32)
    text = "HloModule m\nENTRY e {\n a = f32[2,2,2] parameter(0)\n ROOT r = f32[2,2,2] cholesky(a), lower=true\n}"
    ours, ref = _both(text, [np.stack([good, bad])])
    assert np.isnan(ref[0][1]).all() and np.isnan(ours[0][1]).all()
    assert_close([ours[0][0]], [ref[0][0]], rtol=1e-6, atol=1e-6)


_SOLVES = list(itertools.product([True, False], [True, False], [False, True], ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"]))


@pytest.mark.parametrize("ty", ["f32", "c128"])
@pytest.mark.parametrize("left, lower, unit, trans", _SOLVES)
def test_triangular_solve_matches_xla_cpu(ty: str, left: bool, lower: bool, unit: bool, trans: str) -> None:
    rng = np.random.default_rng(7)
    npdt, m, n, batch = _TYPES[ty], 4, 3, (2,)
    a = _matrix(rng, batch + (m, m), npdt) + 4 * np.eye(m, dtype=npdt)  # well conditioned
    b = _matrix(rng, batch + ((m, n) if left else (n, m)), npdt)
    adims, bdims = ",".join(map(str, a.shape)), ",".join(map(str, b.shape))
    text = (f"HloModule m\nENTRY e {{\n a = {ty}[{adims}] parameter(0)\n b = {ty}[{bdims}] parameter(1)\n"
            f" ROOT r = {ty}[{bdims}] triangular-solve(a, b), left_side={str(left).lower()}, "
            f"lower={str(lower).lower()}, unit_diagonal={str(unit).lower()}, transpose_a={trans}\n}}")
    ours, ref = _both(text, [a, b])
    assert_close(ours, ref, rtol=_TOL[ty], atol=_TOL[ty])


@pytest.mark.parametrize("body, message", [
    ("a = f32[3,3] parameter(0)\n b = f32[2,3] parameter(1)\n ROOT r = f32[2,3] triangular-solve(a, b), "
     "left_side=true, lower=true, transpose_a=NO_TRANSPOSE", "must be square"),
    ("a = f32[3,3] parameter(0)\n b = f64[3,2] parameter(1)\n ROOT r = f64[3,2] triangular-solve(a, b), "
     "left_side=true, lower=true, transpose_a=NO_TRANSPOSE", "operands of one type"),
    ("a = s32[3,3] parameter(0)\n ROOT r = s32[3,3] cholesky(a), lower=true", "cholesky takes square"),
    ("a = f32[3,2] parameter(0)\n ROOT r = f32[3,2] cholesky(a), lower=true", "cholesky takes square"),
])
def test_bad_shapes_are_compile_errors(body: str, message: str) -> None:
    with pytest.raises(CompileError, match=message):
        compile_module(hlo.load(f"HloModule m\nENTRY e {{\n {body}\n}}"))
