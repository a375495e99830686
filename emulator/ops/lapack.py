"""LAPACK routines behind JAX's CPU linear algebra (`lapack_*_ffi` custom-calls).

Each handler calls the LAPACK routine itself (through SciPy's wrappers) once per matrix of the
batch, with the arguments jaxlib's FFI kernels pass (jaxlib/cpu/lapack_kernels.cc), so results,
pivots and `info` codes are the ones XLA:CPU produces: jaxlib takes its LAPACK from SciPy too.
Where jaxlib adds behaviour around the call, so do we: 1-based s32 pivots (getrf), an all-finite
check before geev (info = -4 otherwise), the unpacking of real geev's eigenvectors into complex
ones, gtsv's padded off-diagonals, and LAPACK's optimal workspace sizes (which pick blocked or
unblocked code). geqp3's fixed columns, which SciPy's wrapper cannot pass, are done as LAPACK
does them; jaxlib's one non-LAPACK kernel (tridiagonal_solve_perturbed_ffi) is ported to NumPy. Outputs that LAPACK leaves unreferenced (u and vt of an SVD without vectors, the
eigenvectors nobody asked for) are zeros here; XLA:CPU leaves whatever its buffer held, and JAX
never reads them.

Why a Python loop over the batch: LAPACK works on one matrix at a time, as it does in jaxlib.
Matrices with a zero dimension are not passed to LAPACK (SciPy reports an illegal leading
dimension for them); their outputs are empty or zero and info is 0, LAPACK's quick return.
SciPy is imported on first use, so that loading programs without LAPACK ops stays light.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from emulator.program.context import HandlerContext
from emulator.program.dtypes import DTYPES, TUPLE
from emulator.program.ops import handles

#: One matrix's work: operand matrices in, result leaves out (None leaves the zero-filled output).
MatrixFn = Callable[..., tuple[Any, ...]]


def _lapack(name: str, dtype: np.dtype) -> Callable[..., Any]:
    """The SciPy wrapper of LAPACK routine `name` for `dtype` (s/d/c/z prefix chosen by SciPy)."""
    from scipy.linalg import lapack

    return lapack.get_lapack_funcs(name, dtype=dtype)


def _blas(name: str, dtype: np.dtype) -> Callable[..., Any]:
    from scipy.linalg import blas

    return blas.get_blas_funcs(name, dtype=dtype)


def _leaves(ctx: HandlerContext) -> list[tuple[np.dtype, tuple[int, ...]]]:
    t = ctx.type
    types = t[1] if t[0] == TUPLE else [t]
    return [(DTYPES[leaf[0]], tuple(leaf[1])) for leaf in types]


def _batched(ctx: HandlerContext, fn: MatrixFn, matrix_rank: tuple[int, ...],
             aliases: dict[int, int] | None = None) -> Callable[..., Any]:
    """A handler applying `fn` to each matrix of the batch.

    `matrix_rank[k]` is how many trailing dims of operand k belong to one problem (2 for a
    matrix, 1 for tau); the leading dims of operand 0 are the batch, shared by every operand and
    result. Results are allocated once per call and `fn`'s leaves written into them: result r
    starts as a copy of operand `aliases[r]` (the buffers jaxlib's kernel updates in place, so
    what LAPACK leaves alone, e.g. on a quick return, is the input), the others zero-filled."""
    leaves = _leaves(ctx)
    tuple_result = ctx.type[0] == TUPLE
    batch = ctx.in_shape(0)[:len(ctx.in_shape(0)) - matrix_rank[0]]
    empty = any(d == 0 for d in ctx.in_shape(0)[len(batch):])
    aliases = aliases or {}

    def run(*operands: np.ndarray) -> Any:
        outs = [np.array(operands[aliases[r]], dtype, copy=True) if r in aliases else np.zeros(shape, dtype)
                for r, (dtype, shape) in enumerate(leaves)]
        if not empty:
            for idx in np.ndindex(*batch):
                results = fn(*(x[idx] for x in operands))
                for out, r in zip(outs, results):
                    if r is not None:
                        out[idx] = r
        return tuple(outs) if tuple_result else outs[0]
    return run


def _fortran_copy(a: np.ndarray) -> np.ndarray:
    """A column-major copy LAPACK may overwrite in place (overwrite_a=1 then returns what LAPACK
    left in the matrix, which XLA:CPU returns as the custom-call's first result)."""
    return np.array(a, order="F", copy=True)


@handles("lapack_getrf")
def _getrf(ctx: HandlerContext) -> Callable[..., Any]:
    getrf = _lapack("getrf", ctx.in_dtype(0))

    def one(a: np.ndarray) -> tuple[Any, ...]:
        lu, piv, info = getrf(a)
        return lu, piv + 1, info  # SciPy makes pivots 0-based; LAPACK's (and jaxlib's) are 1-based
    return _batched(ctx, one, (2,))


_TRANS = {"N": 0, "T": 1, "C": 2}


@handles("lapack_trsm")
def _trsm(ctx: HandlerContext) -> Callable[..., Any]:
    at = ctx.attrs
    if at["transpose"] not in _TRANS:
        raise ValueError(f"transpose must be one of N, T, C, not {at['transpose']!r}")
    trsm = _blas("trsm", ctx.in_dtype(1))
    side, lower, trans, diag = int(not at["left_side"]), int(at["lower"]), _TRANS[at["transpose"]], \
        int(at["unit_diagonal"])
    alpha = np.ones((), ctx.in_dtype(1))[()]  # jaxlib solves with alpha = 1
    b_rank = len(ctx.in_shape(1))
    batch = ctx.in_shape(1)[:b_rank - 2]
    empty = 0 in ctx.in_shape(1)[b_rank - 2:]
    dtype, shape = ctx.dtype, ctx.shape

    def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        # batch dims from b (the solved operand), as jaxlib's kernel takes them
        out = np.array(b, dtype=dtype, copy=True) if empty else np.empty(shape, dtype)
        if not empty:
            for idx in np.ndindex(*batch):
                out[idx] = trsm(alpha, a[idx], b[idx], side=side, lower=lower, trans_a=trans, diag=diag)
        return out
    return run


@handles("lapack_potrf")
def _potrf(ctx: HandlerContext) -> Callable[..., Any]:
    potrf = _lapack("potrf", ctx.in_dtype(0))
    lower = int(ctx.attrs["lower"])

    def one(a: np.ndarray) -> tuple[Any, ...]:
        # clean=0: the other triangle stays as the input had it, as LAPACK leaves it
        return potrf(a, lower=lower, clean=0)
    return _batched(ctx, one, (2,))


@handles("cholesky")
def _cholesky(ctx: HandlerContext) -> Callable[..., Any]:
    """HLO's cholesky as XLA:CPU computes it: the factor in the `lower` (or upper) triangle, zeros
    in the other, and a matrix that is not positive definite (potrf's info > 0) all NaN, as XLA's
    Cholesky expander selects NaN for a failed factorisation."""
    potrf = _lapack("potrf", ctx.in_dtype(0))
    lower = int(ctx.attrs["lower"])
    nan = np.array(np.nan, ctx.dtype)

    def one(a: np.ndarray) -> tuple[Any, ...]:
        factor, info = potrf(a, lower=lower, clean=1)
        return (np.full_like(factor, nan) if info != 0 else factor),
    return _batched(ctx, one, (2,))


@handles("lapack_syevd")
def _syevd(ctx: HandlerContext) -> Callable[..., Any]:
    dtype = ctx.in_dtype(0)
    syevd = _lapack("heevd" if dtype.kind == "c" else "syevd", dtype)
    lower, vectors = int(ctx.attrs["lower"]), int(ctx.attrs["vectors"])

    def one(a: np.ndarray) -> tuple[Any, ...]:
        # without vectors LAPACK destroys the triangle it read: v is that matrix then
        w, v, info = syevd(_fortran_copy(a), compute_v=vectors, lower=lower, overwrite_a=1)
        return v, w, info
    return _batched(ctx, one, (2,))


_JOBS = {"A": (1, 1), "S": (1, 0), "N": (0, 0)}  # job -> (compute_uv, full_matrices)


@handles("lapack_gesvd")
def _gesvd(ctx: HandlerContext) -> Callable[..., Any]:
    driver, job = ctx.attrs["driver"], ctx.attrs["job"]
    if driver not in ("gesdd", "gesvd") or job not in _JOBS:
        raise ValueError(f"bad SVD driver/job {driver!r}/{job!r}")
    svd = _lapack(driver, ctx.in_dtype(0))
    compute_uv, full = _JOBS[job]

    def one(a: np.ndarray) -> tuple[Any, ...]:
        work = _fortran_copy(a)
        u, s, vt, info = svd(work, compute_uv=compute_uv, full_matrices=full, overwrite_a=1)
        if not compute_uv:
            u = vt = None  # unreferenced by LAPACK
        return work, s, u, vt, info
    return _batched(ctx, one, (2,))


@handles("lapack_geqrf")
def _geqrf(ctx: HandlerContext) -> Callable[..., Any]:
    geqrf = _lapack("geqrf", ctx.in_dtype(0))

    def one(a: np.ndarray) -> tuple[Any, ...]:
        qr, tau, _work, _info = geqrf(a)  # jaxlib's kernel has no info output either
        return qr, tau
    return _batched(ctx, one, (2,))


@handles("lapack_orgqr")
def _orgqr(ctx: HandlerContext) -> Callable[..., Any]:
    dtype = ctx.in_dtype(0)
    orgqr = _lapack("ungqr" if dtype.kind == "c" else "orgqr", dtype)

    def one(a: np.ndarray, tau: np.ndarray) -> tuple[Any, ...]:
        q, _work, _info = orgqr(a, tau)
        return (q,)
    return _batched(ctx, one, (2, 1))


def unpack_eigenvectors(wi: np.ndarray, packed: np.ndarray) -> np.ndarray:
    """Real geev's packed eigenvectors as complex columns (jaxlib's UnpackEigenvectors): a column
    j with wi[j] != 0 (and not NaN) starts a conjugate pair whose real part is column j and
    imaginary part column j + 1."""
    out = packed.astype(np.result_type(packed.dtype, np.complex64))
    j, n = 0, len(wi)
    while j < n:
        if wi[j] == 0 or np.isnan(wi[j]) or j + 1 >= n:
            j += 1
            continue
        re, im = packed[:, j], packed[:, j + 1]
        out[:, j] = re + 1j * im
        out[:, j + 1] = re - 1j * im
        j += 2
    return out


@handles("lapack_geev")
def _geev(ctx: HandlerContext) -> Callable[..., Any]:
    dtype = ctx.in_dtype(0)
    geev = _lapack("geev", dtype)
    left, right = int(ctx.attrs["left"]), int(ctx.attrs["right"])
    complex_input = dtype.kind == "c"
    n_values = 1 if complex_input else 2  # w, or wr and wi

    def one(a: np.ndarray) -> tuple[Any, ...]:
        if not np.isfinite(a).all():  # jaxlib does not call LAPACK on such a matrix
            return (None,) * (n_values + 2) + (-4,)
        *values, vl, vr, info = geev(a, compute_vl=left, compute_vr=right)
        if info != 0:
            return (*values, None, None, info)
        if not complex_input:
            wi = values[1]
            vl = unpack_eigenvectors(wi, vl) if left else None
            vr = unpack_eigenvectors(wi, vr) if right else None
        return (*values, vl if left else None, vr if right else None, info)
    return _batched(ctx, one, (2,))


def _optimal_lwork(query: Callable[..., Any], work_index: int, *args: Any, **kwargs: Any) -> int:
    """LAPACK's optimal workspace size for a call (an lwork = -1 query). jaxlib sizes every
    workspace this way, and some routines (gehrd, gees, geqp3, ormqr) choose between blocked and
    unblocked code by the workspace they get, so we ask for the same size to take the same path."""
    out = query(*args, lwork=-1, **kwargs)
    return max(1, int(np.real(out[work_index].flat[0])))


def _no_select(*_args: Any) -> int:
    """gees' eigenvalue selector: never called, jaxlib only runs gees with sort = N."""
    return 0


@handles("lapack_gees")
def _gees(ctx: HandlerContext) -> Callable[..., Any]:
    dtype = ctx.in_dtype(0)
    gees = _lapack("gees", dtype)
    vectors = int(ctx.attrs["vectors"])
    complex_input = dtype.kind == "c"

    def one(a: np.ndarray) -> tuple[Any, ...]:
        lwork = _optimal_lwork(gees, -2, _no_select, a, compute_v=vectors, sort_t=0)
        if complex_input:
            t, sdim, w, vs, _work, info = gees(_no_select, a, compute_v=vectors, sort_t=0, lwork=lwork)
            return t, vs if vectors else None, w, sdim, info
        t, sdim, wr, wi, vs, _work, info = gees(_no_select, a, compute_v=vectors, sort_t=0, lwork=lwork)
        return t, vs if vectors else None, wr, wi, sdim, info
    return _batched(ctx, one, (2,), aliases={0: 0})


@handles("lapack_gehrd")
def _gehrd(ctx: HandlerContext) -> Callable[..., Any]:
    dtype = ctx.in_dtype(0)
    gehrd, gehrd_lwork = _lapack("gehrd", dtype), _lapack("gehrd_lwork", dtype)
    lo, hi = ctx.attrs["low"] - 1, ctx.attrs["high"] - 1  # SciPy's wrapper takes them 0-based
    n = ctx.in_shape(0)[-1]

    def one(a: np.ndarray) -> tuple[Any, ...]:
        work, _info = gehrd_lwork(n, lo=lo, hi=hi)
        return gehrd(a, lo=lo, hi=hi, lwork=max(1, int(np.real(work))))
    return _batched(ctx, one, (2,), aliases={0: 0})


@handles("lapack_sytrd")
def _sytrd(ctx: HandlerContext) -> Callable[..., Any]:
    dtype = ctx.in_dtype(0)
    name = "hetrd" if dtype.kind == "c" else "sytrd"
    sytrd, sytrd_lwork = _lapack(name, dtype), _lapack(name + "_lwork", dtype)
    lower = int(ctx.attrs["lower"])
    n = ctx.in_shape(0)[-1]

    def one(a: np.ndarray) -> tuple[Any, ...]:
        work, _info = sytrd_lwork(n, lower=1)  # jaxlib queries with uplo = L whatever uplo is
        return sytrd(a, lower=lower, lwork=max(1, int(np.real(work))))  # a', d, e, tau, info
    return _batched(ctx, one, (2,), aliases={0: 0})


@handles("lapack_geqp3")
def _geqp3(ctx: HandlerContext) -> Callable[..., Any]:
    dtype = ctx.in_dtype(0)
    geqp3, geqrf = _lapack("geqp3", dtype), _lapack("geqrf", dtype)
    ormqr = _lapack("unmqr" if dtype.kind == "c" else "ormqr", dtype)
    adjoint = "C" if dtype.kind == "c" else "T"

    def free(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """geqp3 with every column free: SciPy's wrapper, 1-based pivots."""
        lwork = _optimal_lwork(geqp3, 3, a)
        qr, jpvt, tau, _work, _info = geqp3(a, lwork=lwork)
        return qr, jpvt, tau

    def one(a: np.ndarray, jpvt_in: np.ndarray) -> tuple[Any, ...]:
        if not jpvt_in.any():
            return free(a)
        # Fixed columns (jpvt != 0 on entry), as LAPACK's geqp3 does it (SciPy's wrapper cannot
        # take them): move them to the front in order, factor them with geqrf, apply Q^H to the
        # rest, then pivot the free columns below the fixed rows.
        a = np.array(a, order="F", copy=True)
        m, n = a.shape
        jpvt = np.arange(1, n + 1, dtype=np.int32)
        nfxd = 0
        for j in range(n):
            if jpvt_in[j] != 0:
                if j != nfxd:
                    a[:, [j, nfxd]] = a[:, [nfxd, j]]
                    jpvt[j], jpvt[nfxd] = jpvt[nfxd], j + 1
                nfxd += 1
        tau = np.zeros(min(m, n), a.dtype)
        na = min(m, nfxd)
        if na:
            qr, tau[:na], _work, _info = geqrf(a[:, :na], lwork=_optimal_lwork(geqrf, 2, a[:, :na]))
            a[:, :na] = qr
            if na < n:
                lwork = _optimal_lwork(ormqr, 1, "L", adjoint, qr, tau[:na], a[:, na:])
                a[:, na:], _work, _info = ormqr("L", adjoint, qr, tau[:na], a[:, na:], lwork)
        if nfxd < min(m, n):
            sub_qr, sub_jpvt, tau[nfxd:] = free(a[nfxd:, nfxd:])
            order = sub_jpvt - 1  # the trailing pivots swap whole columns, fixed rows too
            a[:nfxd, nfxd:] = a[:nfxd, nfxd:][:, order]
            a[nfxd:, nfxd:] = sub_qr
            jpvt[nfxd:] = jpvt[nfxd:][order]
        return a, jpvt, tau
    return _batched(ctx, one, (2, 1), aliases={0: 0, 1: 1})


@handles("lapack_ormqr")
def _ormqr(ctx: HandlerContext) -> Callable[..., Any]:
    dtype = ctx.in_dtype(2)
    ormqr = _lapack("unmqr" if dtype.kind == "c" else "ormqr", dtype)
    side = "L" if ctx.attrs["left"] else "R"
    trans = ("C" if dtype.kind == "c" else "T") if ctx.attrs["transpose"] else "N"
    k = ctx.in_shape(1)[-1]

    def one(a: np.ndarray, tau: np.ndarray, c: np.ndarray) -> tuple[Any, ...]:
        if k == 0 or c.size == 0:
            return (None,)  # LAPACK's quick return: c as it came
        a = a[:, :k]  # LAPACK reads the first k columns (the reflectors) of a
        lwork = _optimal_lwork(ormqr, 1, side, trans, a, tau, c)
        cq, _work, _info = ormqr(side, trans, a, tau, c, lwork)
        return (cq,)
    return _batched(ctx, one, (2, 1, 2), aliases={0: 2})


@handles("lapack_gtsv")
def _gtsv(ctx: HandlerContext) -> Callable[..., Any]:
    gtsv = _lapack("gtsv", ctx.in_dtype(3))

    def one(dl: np.ndarray, d: np.ndarray, du: np.ndarray, b: np.ndarray) -> tuple[Any, ...]:
        if len(d) == 1:  # SciPy refuses empty off-diagonals; LAPACK's n = 1 path is one division
            return None, None, None, (b / d[0] if d[0] != 0 else None), int(d[0] == 0)
        # jaxlib passes dl + 1 and du as LAPACK's n-1 off-diagonals: dl[0] and du[n-1] are padding
        dl2, d_out, du_out, x, info = gtsv(dl[1:], d, du[:-1], b)
        dl_out, du_new = dl.copy(), du.copy()
        dl_out[1:], du_new[:-1] = dl2, du_out
        return dl_out, d_out, du_new, x, info
    return _batched(ctx, one, (1, 1, 1, 2), aliases={0: 0, 1: 1, 2: 2, 3: 3})


def _maybe_perturb_pivot(perturb: np.ndarray, pivot: np.ndarray, row: np.ndarray) -> None:
    """jaxlib's MaybePerturbPivot (from LAPACK's xLAGTS), for a batch: grow each tiny pivot by
    `perturb` (doubling it each time) or scale pivot and `row` (that system's rhs row) up, until
    neither row / pivot nor 1 / pivot overflows. `pivot` and `row` are updated in place."""
    real = np.finfo(pivot.dtype)
    tiny, small = real.dtype.type(real.tiny), real.dtype.type(1) / real.max
    safemin = tiny if small < tiny else small * (1 + real.eps)
    bignum = real.dtype.type(1) / safemin
    abs_pivot = np.abs(pivot)
    active = abs_pivot < 1
    if not active.any():
        return
    perturb = np.copysign(np.maximum(np.abs(perturb), safemin), pivot.real)
    max_factor = np.abs(row).max(axis=-1) if row.shape[-1] else np.zeros_like(abs_pivot)
    while active.any():
        below = abs_pivot < safemin
        grow = np.where(below, (abs_pivot == 0) | (max_factor * safemin > abs_pivot), max_factor > abs_pivot * bignum)
        scale = below & ~grow
        grow &= active
        scale &= active
        pivot += np.where(grow, perturb, 0)
        perturb = np.where(grow, perturb * 2, perturb)
        pivot *= np.where(scale, bignum, 1)
        row *= np.where(scale, bignum, 1)[:, None]
        abs_pivot = np.abs(pivot)
        active &= grow & (abs_pivot < 1)  # a scaled or unchanged pivot stops


def perturbed_tridiagonal_solve(dl: np.ndarray, d: np.ndarray, du: np.ndarray, b: np.ndarray) -> np.ndarray:
    """jaxlib's SolveWithGaussianEliminationWithPivotingAndPerturbSingular for a batch of systems:
    row-pivoted LU of each tridiagonal matrix fused with the forward solve, then back substitution
    that perturbs tiny pivots instead of dividing by them (so singular T - lambda I still gives a
    vector: eigh_tridiagonal's inverse iteration). dl[:, 0] and du[:, n-1] are padding.

    Shapes: dl, d, du (batch, n); b (batch, n, k). Vectorised over the batch: each step of the
    recurrence is one NumPy operation on every system, the branches chosen per system by masks."""
    batch, n, _k = b.shape
    x = np.zeros_like(b)
    if n == 0 or batch == 0:
        return x
    eps = np.finfo(b.dtype).eps
    with np.errstate(all="ignore"):  # the C++ code divides by zero and NaN where it does
        if n == 1:
            pivot, row = d[:, 0].copy(), b[:, 0].copy()
            _maybe_perturb_pivot(eps * np.abs(pivot), pivot, row)
            x[:, 0] = row / pivot[:, None]
            return x
        u = np.zeros((batch, n, 3), b.dtype)  # U's diagonal, superdiagonal, second superdiagonal
        u[:, 0, 0], u[:, 0, 1] = d[:, 0], du[:, 0]
        max_abs_u = np.maximum(np.abs(u[:, 0, 0]), np.abs(u[:, 0, 1]))
        scale1 = np.abs(u[:, 0, 0]) + np.abs(u[:, 0, 1])
        x[:, 0] = b[:, 0]
        for k in range(n - 1):
            sub, diag, sup = dl[:, k + 1], d[:, k + 1], du[:, k + 1]
            scale2 = np.abs(sub) + np.abs(diag) + (np.abs(sup) if k < n - 2 else 0)
            piv1 = np.where(u[:, k, 0] == 0, 0, np.abs(u[:, k, 0]) / scale1)
            zero_sub = sub == 0
            keep = ~zero_sub & (np.abs(sub) / scale2 <= piv1)
            swap = ~zero_sub & ~keep
            keep_factor = sub / u[:, k, 0]
            swap_factor = u[:, k, 0] / sub
            new_u1 = np.where(swap, -swap_factor * sup, sup) if k < n - 2 else np.where(swap, 0, sup)
            u[:, k + 1, 0] = np.where(keep, diag - keep_factor * u[:, k, 1],
                                      np.where(swap, u[:, k, 1] - swap_factor * diag, diag))
            u[:, k + 1, 1] = new_u1
            u[:, k, 2] = np.where(swap, sup if k < n - 2 else u[:, k, 2], 0)
            u[:, k, 1] = np.where(swap, diag, u[:, k, 1])
            u[:, k, 0] = np.where(swap, sub, u[:, k, 0])
            rhs, prev = b[:, k + 1], x[:, k].copy()
            x[:, k + 1] = np.where(keep[:, None], rhs - keep_factor[:, None] * prev,
                                   np.where(swap[:, None], prev - swap_factor[:, None] * rhs, rhs))
            x[:, k] = np.where(swap[:, None], rhs, prev)
            scale1 = np.where(swap, np.abs(u[:, k + 1, 0]) + np.abs(u[:, k + 1, 1]), scale2)
            if k < n - 2:
                max_abs_u = np.maximum(max_abs_u, np.abs(u[:, k]).max(axis=-1))
        max_abs_u = np.maximum(max_abs_u, np.abs(u[:, n - 1, 0]))
        perturb = eps * max_abs_u
        for k in range(n - 1, -1, -1):
            pivot, row = u[:, k, 0].copy(), x[:, k].copy()
            if k < n - 1:
                row = row - u[:, k, 1, None] * x[:, k + 1]
            if k < n - 2:
                row = row - u[:, k, 2, None] * x[:, k + 2]
            _maybe_perturb_pivot(perturb if k == n - 1 else np.copysign(perturb, pivot.real), pivot, row)
            x[:, k] = row * (1 / pivot)[:, None]
    return x


@handles("tridiagonal_solve_perturbed")
def _tridiagonal_solve_perturbed(ctx: HandlerContext) -> Callable[..., Any]:
    batch = ctx.in_shape(3)[:-2]

    def run(dl: np.ndarray, d: np.ndarray, du: np.ndarray, b: np.ndarray) -> np.ndarray:
        n, k = b.shape[-2:]
        if b.size == 0:  # nothing to solve (and no -1 to infer in the reshapes below)
            return np.zeros(b.shape, b.dtype)
        flat = [np.asarray(v).reshape(-1, n) for v in (dl, d, du)]
        return perturbed_tridiagonal_solve(*flat, np.asarray(b).reshape(-1, n, k)).reshape(*batch, n, k)
    return run
