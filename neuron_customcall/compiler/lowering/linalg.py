"""Dot, convolution, FFT, and the linear-algebra opcodes (triangular-solve, cholesky)."""
from __future__ import annotations

from typing import Any

from neuron_customcall.compiler.errors import CompileError
from neuron_customcall.compiler.lowering.context import LowerCtx
from neuron_customcall.compiler.lowering.reduce import window_attrs
from neuron_customcall.compiler.lowering.registry import fail, lowers, shape_dims, shape_rule, shapes


@lowers("dot")
def _dot(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    d = inst.attributes.dot_dimension_numbers
    return "dot", {"lhs_contracting": list(d.lhs_contracting_dimensions),
                   "rhs_contracting": list(d.rhs_contracting_dimensions),
                   "lhs_batch": list(d.lhs_batch_dimensions), "rhs_batch": list(d.rhs_batch_dimensions),
                   "out_perm": ctx.fused_transposes.get(id(inst), [])}


@lowers("convolution")
def _convolution(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    c = inst.attributes.convolution_dimension_numbers
    nsp = len(c.input_spatial_dimensions)
    w = window_attrs(inst, nsp) if inst.attributes.window.dimensions or nsp else {
        k: [] for k in ("size", "stride", "pad_low", "pad_high", "base_dilation", "window_dilation")}
    return "convolution", {
        **w, "window_reversal": [int(d.window_reversal) for d in inst.attributes.window.dimensions],
        "feature_group_count": int(inst.attributes.feature_group_count or 1),
        "batch_group_count": int(inst.attributes.batch_group_count or 1),
        "input_batch": c.input_batch_dimension, "input_feature": c.input_feature_dimension,
        "input_spatial": list(c.input_spatial_dimensions),
        "kernel_input_feature": c.kernel_input_feature_dimension,
        "kernel_output_feature": c.kernel_output_feature_dimension,
        "kernel_spatial": list(c.kernel_spatial_dimensions),
        "output_batch": c.output_batch_dimension, "output_feature": c.output_feature_dimension,
        "output_spatial": list(c.output_spatial_dimensions),
    }


_FFT_TYPES = {0: "FFT", 1: "IFFT", 2: "RFFT", 3: "IRFFT"}


@lowers("fft")
def _fft(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return "fft", {"fft_type": _FFT_TYPES[int(inst.attributes.fft_type)], "length": list(inst.attributes.fft_length)}


#: TriangularSolveOptions.Transpose -> the trsm letter (N, T, C = adjoint)
_TRANSPOSE_A = {1: "N", 2: "T", 3: "C"}


@lowers("triangular-solve")
def _triangular_solve(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    """XLA's triangular-solve is BLAS trsm with alpha = 1: the same op JAX's `lapack_ptrsm_ffi`
    custom-call lowers to (op(a) x = b, or x op(a) = b; only a's `lower` triangle is read)."""
    o = inst.attributes.triangular_solve_options
    trans = _TRANSPOSE_A.get(int(o.transpose_a))
    if trans is None:
        fail(inst, "triangular-solve needs transpose_a=NO_TRANSPOSE, TRANSPOSE or ADJOINT")
    return "lapack_trsm", {"left_side": bool(o.left_side), "lower": bool(o.lower), "transpose": trans,
                           "unit_diagonal": bool(o.unit_diagonal)}


@lowers("cholesky")
def _cholesky(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return "cholesky", {"lower": bool(inst.attributes.cholesky_options.lower)}


# -- shape rules (XLA's; run by the verifier before lowering) ------------------------------
@shape_rule("dot")
def _dot_shapes(inst: Any) -> None:
    ops, out = shapes(inst)
    d = inst.attributes.dot_dimension_numbers
    l, r = ops
    lc, rc = list(d.lhs_contracting_dimensions), list(d.rhs_contracting_dimensions)
    lb, rb = list(d.lhs_batch_dimensions), list(d.rhs_batch_dimensions)
    for dims, s in ((lc + lb, l), (rc + rb, r)):
        if len(set(dims)) != len(dims) or any(not 0 <= k < s.rank for k in dims):
            fail(inst, f"dot dimension numbers {dims} are not distinct dimensions of {s}")
    if len(lc) != len(rc) or len(lb) != len(rb) or any(
            l.dimensions[a] != r.dimensions[b] for a, b in zip(lc + lb, rc + rb)):
        fail(inst, f"dot dimension numbers do not fit {l} and {r}")
    lf = [l.dimensions[k] for k in range(l.rank) if k not in lc and k not in lb]
    rf = [r.dimensions[k] for k in range(r.rank) if k not in rc and k not in rb]
    if tuple([l.dimensions[k] for k in lb] + lf + rf) != shape_dims(out):
        fail(inst, f"dot result should be {[l.dimensions[k] for k in lb] + lf + rf}, is {out}")


@shape_rule("convolution")
def _convolution_shapes(inst: Any) -> None:
    """XLA's shape rule for convolution: feature and batch groups, and each output spatial size."""
    (lhs, rhs), out = shapes(inst)
    c = inst.attributes.convolution_dimension_numbers
    fgc = inst.attributes.feature_group_count or 1
    bgc = inst.attributes.batch_group_count or 1
    w = inst.attributes.window.dimensions
    nsp = len(c.input_spatial_dimensions)
    ranks_ok = lhs.rank == rhs.rank == out.rank == nsp + 2 and len(w) == nsp and \
        len(c.kernel_spatial_dimensions) == len(c.output_spatial_dimensions) == nsp
    if not ranks_ok:
        fail(inst, f"convolution ranks do not fit: {lhs}, {rhs} -> {out} with {nsp} spatial dims")
    cin, batch = lhs.dimensions[c.input_feature_dimension], lhs.dimensions[c.input_batch_dimension]
    kin, kout = rhs.dimensions[c.kernel_input_feature_dimension], rhs.dimensions[c.kernel_output_feature_dimension]
    if cin != kin * fgc or kout % fgc or kout % bgc or batch % bgc or (fgc > 1 and bgc > 1):
        fail(inst, f"convolution features/groups do not fit: input features {cin}, kernel {kin}->{kout}, "
                    f"feature_group_count {fgc}, batch_group_count {bgc}, batch {batch}")
    want = [0] * out.rank
    want[c.output_batch_dimension] = batch // bgc
    want[c.output_feature_dimension] = kout
    for k in range(nsp):
        d = lhs.dimensions[c.input_spatial_dimensions[k]]
        wd = w[k]
        if wd.size != rhs.dimensions[c.kernel_spatial_dimensions[k]]:
            fail(inst, f"window size {wd.size} differs from kernel spatial size in dim {k}")
        padded = wd.padding_low + wd.padding_high + ((d - 1) * (wd.base_dilation or 1) + 1 if d else 0)
        span = (wd.size - 1) * (wd.window_dilation or 1) + 1
        want[c.output_spatial_dimensions[k]] = (padded - span) // (wd.stride or 1) + 1 if padded >= span else 0
    if tuple(want) != shape_dims(out):
        fail(inst, f"convolution of {lhs} by {rhs} gives {want}, the result is {out}")


_LINALG_TYPES = ("F32", "F64", "C64", "C128")


@shape_rule("triangular-solve")
def _triangular_solve_shapes(inst: Any) -> None:
    """XLA's: a is [..., m, m] (m the rows of b on the left side, its columns on the right), b
    [..., m, n] with the same batch dims, result b's shape; float or complex (LAPACK's types)."""
    (a, b), out = shapes(inst)
    if a.element_type not in _LINALG_TYPES or b.element_type != a.element_type or out.element_type != a.element_type:
        fail(inst, f"triangular-solve takes f32, f64, c64 or c128 operands of one type, not {a} and {b}")
    left = inst.attributes.triangular_solve_options.left_side
    if a.rank < 2 or a.rank != b.rank or a.dimensions[-1] != a.dimensions[-2] or \
            shape_dims(a)[:-2] != shape_dims(b)[:-2] or \
            a.dimensions[-1] != b.dimensions[-2 if left else -1]:
        fail(inst, f"triangular-solve of a {a} and b {b}: a must be square [..., m, m] with m the "
                   f"{'rows' if left else 'columns'} of b and the same batch dimensions")
    if shape_dims(out) != shape_dims(b):
        fail(inst, f"triangular-solve result should be {b}, is {out}")


@shape_rule("cholesky")
def _cholesky_shapes(inst: Any) -> None:
    (a,), out = shapes(inst)
    if a.element_type not in _LINALG_TYPES or a.rank < 2 or a.dimensions[-1] != a.dimensions[-2]:
        fail(inst, f"cholesky takes square [..., n, n] f32, f64, c64 or c128 matrices, not {a}")
    if shape_dims(out) != shape_dims(a) or out.element_type != a.element_type:
        fail(inst, f"cholesky result should be {a}, is {out}")
