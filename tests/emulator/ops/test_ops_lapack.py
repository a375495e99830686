"""The LAPACK handlers (emulator/ops/lapack.py) on their own, against LAPACK's definitions: the
factorizations reconstruct their input, pivots are 1-based, `info` is what LAPACK reports
(singular LU, non-positive-definite Cholesky, geev of a non-finite matrix), outputs LAPACK does
not reference are zeros, batches loop over every leading dim, and a program with a LAPACK op
passes the loader's schema check. Tolerances: f32/c64 1e-4, f64/c128 1e-10 on reconstructions
(n = 4..6, well-conditioned inputs)."""
from __future__ import annotations

import numpy as np
import pytest

from emulator import load_artifact
from emulator.artifact import ArtifactContents, write_artifact
import emulator.ops  # noqa: F401 - registers the handlers
from emulator.program.context import HandlerContext
from emulator.program.ops import OPS
from emulator.ops.lapack import unpack_eigenvectors
from emulator.program import Computation, Instruction, Program
from emulator.program.dtypes import name_of

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
TOL = {np.dtype(np.float32): 1e-4, np.dtype(np.complex64): 1e-4, np.dtype(np.float64): 1e-10,
       np.dtype(np.complex128): 1e-10}
ids = lambda d: np.dtype(d).name  # noqa: E731


def _t(a: np.ndarray | tuple) -> list:
    return [name_of(np.dtype(a[0])), list(a[1])] if isinstance(a, tuple) else [name_of(a.dtype), list(a.shape)]


def _run(op: str, attrs: dict, out: list, *operands: np.ndarray):
    """Build the handler as the loader does and run it once."""
    typ = _t(out[0]) if len(out) == 1 else ["tuple", [_t(o) for o in out]]
    ctx = HandlerContext(op, f"{op}.1", attrs, typ, [_t(x) for x in operands], program=None)
    return OPS[op].handler(ctx)(*operands)


def _matrix(*shape: int, dtype=np.float64, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def _h(a: np.ndarray) -> np.ndarray:
    return np.conj(np.swapaxes(a, -1, -2))


def _real(dtype) -> np.dtype:
    return np.finfo(dtype).dtype


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_getrf_reconstructs_with_one_based_pivots_over_two_batch_dims(dtype):
    a = _matrix(2, 3, 5, 4, dtype=dtype)
    lu, ipiv, info = _run("lapack_getrf", {}, [(dtype, a.shape), (np.int32, (2, 3, 4)), (np.int32, (2, 3))], a)
    assert ipiv.dtype == np.int32 and info.dtype == np.int32 and not info.any()
    assert ipiv.min() >= 1 and ipiv.max() <= 5
    for idx in np.ndindex(2, 3):
        lower = np.tril(lu[idx], -1)[:, :4] + np.eye(5, 4)
        upper = np.triu(lu[idx])[:4]
        pa = a[idx].copy()
        for i, p in enumerate(ipiv[idx] - 1):  # LAPACK's row interchanges, in order
            pa[[i, p]] = pa[[p, i]]
        np.testing.assert_allclose(lower @ upper, pa, atol=TOL[np.dtype(dtype)] * 10)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_getrf_reports_the_first_zero_pivot(dtype):
    a = np.array([[[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 0.0, 0.0]], np.zeros((3, 3)), np.eye(3)], dtype)
    _lu, _ipiv, info = _run("lapack_getrf", {}, [(dtype, a.shape), (np.int32, (3, 3)), (np.int32, (3,))], a)
    np.testing.assert_array_equal(info, [2, 1, 0])  # U(i, i) == 0 exactly, 1-based


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("left_side", [True, False], ids=["left", "right"])
@pytest.mark.parametrize("lower", [True, False], ids=["lower", "upper"])
@pytest.mark.parametrize("transpose", ["N", "T", "C"])
@pytest.mark.parametrize("unit_diagonal", [False, True], ids=["diag", "unit"])
def test_trsm_solves_every_variant(dtype, left_side, lower, transpose, unit_diagonal):
    a = _matrix(2, 4, 4, dtype=dtype, seed=1) + 4 * np.eye(4, dtype=dtype)
    b = _matrix(2, 4, 3, dtype=dtype, seed=2) if left_side else _matrix(2, 3, 4, dtype=dtype, seed=2)
    attrs = {"left_side": left_side, "lower": lower, "transpose": transpose, "unit_diagonal": unit_diagonal}
    x = _run("lapack_trsm", attrs, [(dtype, b.shape)], a, b)
    t = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        t = t - t * np.eye(4) + np.eye(4)  # LAPACK never reads the diagonal then
    op = {"N": t, "T": np.swapaxes(t, -1, -2), "C": _h(t)}[transpose]
    np.testing.assert_allclose(op @ x if left_side else x @ op, b, atol=TOL[np.dtype(dtype)] * 10)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("lower", [True, False], ids=["lower", "upper"])
def test_potrf_factors_and_leaves_the_other_triangle_alone(dtype, lower):
    a = _matrix(5, 5, dtype=dtype, seed=3)
    spd = a @ _h(a) + 5 * np.eye(5, dtype=dtype)
    junk = spd + np.where(np.tri(5, k=-1, dtype=bool).T if lower else np.tri(5, k=-1, dtype=bool), 100, 0)
    junk = junk.astype(dtype)
    batch = np.stack([junk, -np.eye(5, dtype=dtype), np.diag([1, 2, -1, 3, 4]).astype(dtype)])
    factor, info = _run("lapack_potrf", {"lower": lower}, [(dtype, batch.shape), (np.int32, (3,))], batch)
    np.testing.assert_array_equal(info, [0, 1, 3])  # order of the first non-positive leading minor
    f = np.tril(factor[0]) if lower else np.triu(factor[0])
    np.testing.assert_allclose(f @ _h(f) if lower else _h(f) @ f, spd, rtol=TOL[np.dtype(dtype)] * 10)
    other = np.triu(np.ones((5, 5), bool), 1) if lower else np.tril(np.ones((5, 5), bool), -1)
    np.testing.assert_array_equal(factor[0][other], junk[other])


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("lower", [True, False], ids=["lower", "upper"])
def test_syevd_with_and_without_vectors(dtype, lower):
    a = _matrix(2, 5, 5, dtype=dtype, seed=4)
    h = a + _h(a)
    out = [(dtype, h.shape), (_real(dtype), (2, 5)), (np.int32, (2,))]
    v, w, info = _run("lapack_syevd", {"lower": lower, "vectors": True}, out, h)
    assert not info.any() and w.dtype == _real(dtype)
    np.testing.assert_allclose(v @ (w[..., None] * _h(v)), h, atol=TOL[np.dtype(dtype)] * 10)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(h), atol=TOL[np.dtype(dtype)] * 10)
    _, w_only, info = _run("lapack_syevd", {"lower": lower, "vectors": False}, out, h)
    assert not info.any()
    np.testing.assert_allclose(w_only, w, atol=TOL[np.dtype(dtype)] * 10)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("driver", ["gesdd", "gesvd"])
@pytest.mark.parametrize("shape", [(6, 4), (4, 6)], ids=str)
def test_svd_jobs(dtype, driver, shape):
    m, n = shape
    k = min(m, n)
    a = _matrix(3, m, n, dtype=dtype, seed=5)
    tol = TOL[np.dtype(dtype)] * 10
    for job, (um, vn) in {"A": (m, n), "S": (k, k)}.items():
        out = [(dtype, a.shape), (_real(dtype), (3, k)), (dtype, (3, m, um)), (dtype, (3, vn, n)), (np.int32, (3,))]
        _a, s, u, vt, info = _run("lapack_gesvd", {"driver": driver, "job": job}, out, a)
        assert not info.any()
        np.testing.assert_allclose((u[..., :k] * s[..., None, :]) @ vt[..., :k, :], a, atol=tol)
    out = [(dtype, a.shape), (_real(dtype), (3, k)), (dtype, (3, m, m)), (dtype, (3, n, n)), (np.int32, (3,))]
    _a, s_only, u, vt, info = _run("lapack_gesvd", {"driver": driver, "job": "N"}, out, a)
    np.testing.assert_allclose(s_only, s, atol=tol)
    assert not u.any() and not vt.any()  # not referenced by LAPACK


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (5, 5)], ids=str)
def test_geqrf_then_orgqr_give_q_and_r(dtype, shape):
    m, n = shape
    k = min(m, n)
    a = _matrix(2, m, n, dtype=dtype, seed=6)
    qr, tau = _run("lapack_geqrf", {}, [(dtype, a.shape), (dtype, (2, k))], a)
    r = np.triu(qr)[..., :k, :]
    q = _run("lapack_orgqr", {}, [(dtype, (2, m, k))], np.ascontiguousarray(qr[..., :k]), tau)
    tol = TOL[np.dtype(dtype)] * 10
    np.testing.assert_allclose(q @ r, a, atol=tol)
    np.testing.assert_allclose(_h(q) @ q, np.broadcast_to(np.eye(k), (2, k, k)), atol=tol)


def test_unpack_eigenvectors_follows_lapack_s_packing():
    wi = np.array([0.0, 2.0, -2.0, np.nan])
    packed = np.arange(16, dtype=np.float64).reshape(4, 4)
    v = unpack_eigenvectors(wi, packed)
    assert v.dtype == np.complex128
    np.testing.assert_array_equal(v[:, 0], packed[:, 0])
    np.testing.assert_array_equal(v[:, 1], packed[:, 1] + 1j * packed[:, 2])
    np.testing.assert_array_equal(v[:, 2], packed[:, 1] - 1j * packed[:, 2])
    np.testing.assert_array_equal(v[:, 3], packed[:, 3])
    assert unpack_eigenvectors(wi.astype(np.float32), packed.astype(np.float32)).dtype == np.complex64


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_geev_eigenpairs_and_the_non_finite_check(dtype):
    a = _matrix(2, 4, 4, dtype=dtype, seed=7)
    a[1, 2, 3] = np.nan
    c = np.result_type(dtype, np.complex64)
    real = np.dtype(dtype).kind == "f"
    values = [(dtype, (2, 4))] * (2 if real else 1)
    out = [*values, (c, a.shape), (c, a.shape), (np.int32, (2,))]
    *w, vl, vr, info = _run("lapack_geev", {"left": True, "right": True}, out, a)
    np.testing.assert_array_equal(info, [0, -4])  # jaxlib does not call geev on a non-finite matrix
    lam = w[0] + 1j * w[1] if real else w[0]
    tol = TOL[np.dtype(dtype)] * 10
    np.testing.assert_allclose(a[0] @ vr[0], vr[0] * lam[0], atol=tol)
    np.testing.assert_allclose(_h(vl[0]) @ a[0], lam[0][:, None] * _h(vl[0]), atol=tol)
    assert not vr[1].any() and not vl[1].any() and not lam[1].any()
    *_, vl, vr, info = _run("lapack_geev", {"left": False, "right": True}, out, a)
    assert not vl.any() and vr[0].any()


def test_empty_matrices_are_lapack_s_quick_return():
    a = np.zeros((2, 0, 0), np.float32)
    lu, ipiv, info = _run("lapack_getrf", {}, [(np.float32, a.shape), (np.int32, (2, 0)), (np.int32, (2,))], a)
    assert lu.shape == (2, 0, 0) and ipiv.shape == (2, 0) and not info.any()
    b = np.zeros((0, 3), np.float64)
    x = _run("lapack_trsm", {"left_side": True, "lower": True, "transpose": "N", "unit_diagonal": False},
             [(np.float64, b.shape)], np.zeros((0, 0)), b)
    assert x.shape == (0, 3)


def test_a_program_with_lapack_ops_loads_and_runs():
    f = ["f64", [3, 3]]
    out = ["tuple", [f, ["s32", []]]]
    comp = Computation("main", 4, [0], [f], [
        Instruction("lapack_potrf", 1, [0], out, {"lower": True}, name="cholesky.1"),
        Instruction("get-tuple-element", 2, [1], f, {"index": 0}, name="gte.1"),
        Instruction("lapack_trsm", 3, [2, 0], f, {"left_side": True, "lower": True, "transpose": "N",
                                                  "unit_diagonal": False}, name="trsm.1"),
    ], 3, f)
    manifest = {"format": "neuron-customcall-neff", "module_name": "t", "hlo_fingerprint": "", "compiler_version": "t",
                "flags": {}, "aliases": [], "inputs": [{"name": "a", "dtype": "f64", "shape": [3, 3]}],
                "outputs": [{"name": "x", "dtype": "f64", "shape": [3, 3]}]}
    exe = load_artifact(write_artifact(ArtifactContents(manifest, Program([comp], 0), [])))
    spd = np.array([[4.0, 2.0, 0.0], [2.0, 5.0, 1.0], [0.0, 1.0, 3.0]])
    (x,) = exe.run([spd])
    chol = np.linalg.cholesky(spd)
    np.testing.assert_allclose(np.tril(chol) @ x, spd, atol=1e-12)


def test_bad_trsm_transpose_is_refused_when_the_handler_is_built():
    with pytest.raises(ValueError, match="transpose"):
        _run("lapack_trsm", {"left_side": True, "lower": True, "transpose": "X", "unit_diagonal": False},
             [(np.float32, (2, 2))], np.eye(2, dtype=np.float32), np.eye(2, dtype=np.float32))


# Schur, Hessenberg, tridiagonal reductions, pivoted QR, Q-multiplies, tridiagonal solves ---------

def _info(*batch: int) -> tuple:
    return (np.int32, batch)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_gees_gives_a_schur_form_and_leaves_unasked_vectors_zero(dtype):
    a = _matrix(2, 5, 5, dtype=dtype, seed=8)
    real = np.dtype(dtype).kind == "f"
    values = [(dtype, (2, 5))] * (2 if real else 1)
    out = [(dtype, a.shape), (dtype, a.shape), *values, _info(2), _info(2)]
    t, vs, *w, sdim, info = _run("lapack_gees", {"vectors": True}, out, a)
    assert not info.any() and not sdim.any()  # never sorted: sdim stays 0
    tol = TOL[np.dtype(dtype)] * 10
    np.testing.assert_allclose(vs @ t @ _h(vs), a, atol=tol)
    assert not np.tril(t, -2 if real else -1).any()
    lam = w[0] + 1j * w[1] if real else w[0]
    np.testing.assert_allclose(np.sort_complex(lam.ravel()), np.sort_complex(np.linalg.eigvals(a).ravel()), atol=tol)
    t_only, vs_none, *_ = _run("lapack_gees", {"vectors": False}, out, a)
    np.testing.assert_array_equal(t_only, t)
    assert not vs_none.any()


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_gehrd_reduces_to_hessenberg_with_lapack_s_reflectors(dtype):
    a = _matrix(3, 5, 5, dtype=dtype, seed=9)
    h, tau, info = _run("lapack_gehrd", {"low": 1, "high": 5}, [(dtype, a.shape), (dtype, (3, 4)), _info(3)], a)
    assert not info.any()
    for i in range(3):  # Q = H(1) ... H(n-1), H(j) = I - tau_j v_j v_j^H, v_j below the subdiagonal
        q = np.eye(5, dtype=dtype)
        for j in range(4):
            v = np.zeros(5, dtype)
            v[j + 1], v[j + 2:] = 1, h[i, j + 2:, j]
            q = q @ (np.eye(5) - tau[i, j] * np.outer(v, np.conj(v)))
        np.testing.assert_allclose(q @ np.triu(h[i], -1) @ _h(q), a[i], atol=TOL[np.dtype(dtype)] * 10)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("lower", [True, False], ids=["lower", "upper"])
def test_sytrd_keeps_the_spectrum(dtype, lower):
    a = _matrix(2, 5, 5, dtype=dtype, seed=10)
    h = a + _h(a)
    out = [(dtype, h.shape), (_real(dtype), (2, 5)), (_real(dtype), (2, 4)), (dtype, (2, 4)), _info(2)]
    _a, d, e, _tau, info = _run("lapack_sytrd", {"lower": lower}, out, h)
    assert not info.any() and d.dtype == _real(dtype)
    t = np.stack([np.diag(d[i]) + np.diag(e[i], 1) + np.diag(e[i], -1) for i in range(2)])
    np.testing.assert_allclose(np.linalg.eigvalsh(t), np.linalg.eigvalsh(h), atol=TOL[np.dtype(dtype)] * 10)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("fixed", [[0, 0, 0, 0], [0, 1, 0, 1], [1, 1, 1, 1]], ids=["free", "two-fixed", "all-fixed"])
def test_geqp3_pivots_and_keeps_fixed_columns_in_front(dtype, fixed):
    a = _matrix(6, 4, dtype=dtype, seed=11)[None]
    jpvt = np.array([fixed], np.int32)
    qr, p, tau = _run("lapack_geqp3", {}, [(dtype, a.shape), (np.int32, (1, 4)), (dtype, (1, 4))], a, jpvt)
    order = p[0] - 1  # 1-based, as LAPACK's
    assert sorted(order) == [0, 1, 2, 3]
    nfxd = sum(fixed)
    assert list(order[:nfxd]) == [j for j in range(4) if fixed[j]]  # fixed columns first, in order
    q = _run("lapack_orgqr", {}, [(dtype, (1, 6, 4))], qr, tau)
    np.testing.assert_allclose(q[0] @ np.triu(qr[0])[:4], a[0][:, order], atol=TOL[np.dtype(dtype)] * 10)
    diag = np.abs(np.diag(qr[0]))[nfxd:]
    assert (diag[:-1] >= diag[1:] * (1 - 1e-5)).all()  # the free columns by decreasing norm


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("left", [True, False], ids=["left", "right"])
@pytest.mark.parametrize("transpose", [False, True], ids=["q", "q^H"])
def test_ormqr_multiplies_by_q_without_forming_it(dtype, left, transpose):
    a = _matrix(2, 5, 5, dtype=dtype, seed=12)
    qr, tau = _run("lapack_geqrf", {}, [(dtype, a.shape), (dtype, (2, 5))], a)
    qr, tau = qr[..., :3], tau[..., :3]  # k = 3 reflectors
    q = _run("lapack_orgqr", {}, [(dtype, (2, 5, 5))], np.concatenate([qr, np.zeros((2, 5, 2), dtype)], -1),
             np.concatenate([tau, np.zeros((2, 2), dtype)], -1))
    c = _matrix(2, 5, 2, dtype=dtype, seed=13) if left else _matrix(2, 2, 5, dtype=dtype, seed=13)
    got = _run("lapack_ormqr", {"left": left, "transpose": transpose}, [(dtype, c.shape)], qr, tau, c)
    op = _h(q) if transpose else q
    np.testing.assert_allclose(got, op @ c if left else c @ op, atol=TOL[np.dtype(dtype)] * 10)


def _tridiagonal(dl: np.ndarray, d: np.ndarray, du: np.ndarray) -> np.ndarray:
    return np.diag(d) + np.diag(dl[1:], -1) + np.diag(du[:-1], 1)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_gtsv_solves_and_reports_a_zero_pivot(dtype):
    g = _matrix(3, 3, 5, dtype=dtype, seed=14)
    g[:, 1] += 4
    g[2] = 0  # singular: info = 1
    b = _matrix(3, 5, 2, dtype=dtype, seed=15)
    out = [(dtype, (3, 5))] * 3 + [(dtype, b.shape), _info(3)]
    dl, d, du, x, info = _run("lapack_gtsv", {}, out, g[:, 0], g[:, 1], g[:, 2], b)
    np.testing.assert_array_equal(info, [0, 0, 1])
    for i in range(2):
        np.testing.assert_allclose(_tridiagonal(*g[i]) @ x[i], b[i], atol=TOL[np.dtype(dtype)] * 10)
    assert dl[0, 0] == g[0, 0, 0] and du[0, -1] == g[0, 2, -1]  # the padding is left alone


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_perturbed_tridiagonal_solve_solves_and_stays_finite_when_singular(dtype):
    g = _matrix(4, 3, 6, dtype=dtype, seed=16)
    g[0, 1] += 4  # regular, diagonally dominant
    g[1, 0] *= 50  # regular, every step swaps rows
    g[2, 1] = 0  # singular pattern: zero pivots
    g[3] = 0  # the zero matrix
    b = _matrix(4, 6, 3, dtype=dtype, seed=17)
    x = _run("tridiagonal_solve_perturbed", {}, [(dtype, b.shape)], g[:, 0], g[:, 1], g[:, 2], b)
    for i in range(2):
        np.testing.assert_allclose(_tridiagonal(*g[i]) @ x[i], b[i], atol=TOL[np.dtype(dtype)] * 100)
    assert np.isfinite(x).all()  # perturbed, never divided by zero


def test_new_routines_keep_quick_returns():
    """Zero-sized problems: aliased outputs are their inputs (jpvt stays as given), others empty."""
    a, jpvt = np.zeros((0, 3), np.float64)[None], np.array([[0, 2, 0]], np.int32)
    _qr, p, tau = _run("lapack_geqp3", {}, [(np.float64, a.shape), (np.int32, (1, 3)), (np.float64, (1, 0))], a, jpvt)
    np.testing.assert_array_equal(p, jpvt)
    c = np.arange(6.0).reshape(1, 3, 2)
    got = _run("lapack_ormqr", {"left": True, "transpose": False}, [(np.float64, c.shape)],
               np.zeros((1, 3, 0)), np.zeros((1, 0)), c)
    np.testing.assert_array_equal(got, c)  # k = 0 reflectors: Q = I
    for shape in [(2, 0, 3), (2, 4, 0), (0, 4, 3)]:  # n = 0, no right-hand sides, an empty batch
        diagonals = np.zeros(shape[:-1], np.float32)
        x = _run("tridiagonal_solve_perturbed", {}, [(np.float32, shape)], diagonals, diagonals, diagonals,
                 np.zeros(shape, np.float32))
        assert x.shape == shape
