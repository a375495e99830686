"""JAX's CPU linear algebra: `lapack_<p><routine>_ffi` custom-calls -> the emulator's LAPACK ops.

JAX lowers jnp.linalg / jax.scipy.linalg on CPU to typed-FFI custom-calls into jaxlib's LAPACK
kernels (jaxlib/cpu/lapack_kernels.cc, registered in jaxlib/cpu/lapack.cc). The target names the
routine and its element type by LAPACK's prefix (s f32, d f64, c c64, z c128); the attributes are
in backend_config as an MLIR dictionary whose enums are `char`s stored as ui8 (jaxlib's
MatrixParams: side L/R, uplo L/U, trans_x N/T/C, diag N/U; svd::ComputationMode A/S/O/N;
eig::ComputationMode V/N; schur::ComputationMode V/N, schur::Sort N/S), besides gehrd's i32
low/high and ormqr's boolean left/transpose. jaxlib's one kernel outside LAPACK's naming,
`tridiagonal_solve_perturbed_ffi` (any element type), lowers here too. Each routine's lowering checks the element type and turns the
character codes into the clean attributes of one emulator op (emulator/program/ops.py); the
handlers are in emulator/ops/lapack.py. Batch dims are the leading dims of the operands.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from neuron_customcall.compiler.errors import CompileError
from neuron_customcall.compiler.lowering.context import LowerCtx
from neuron_customcall.compiler.lowering.ffi_attrs import FfiValue, parse_ffi_attributes

#: HloInstructionProto.custom_call_api_version of typed-FFI calls (xla CustomCallApiVersion).
API_VERSION_TYPED_FFI = 4
_TARGET = re.compile(r"lapack_([sdcz])([a-z][a-z0-9]*)_ffi\Z")
_ELEMENT_TYPE = {"s": "F32", "d": "F64", "c": "C64", "z": "C128"}

Attrs = dict[str, FfiValue]


def _char(attrs: Attrs, name: str, allowed: str, inst: Any) -> str:
    """A jaxlib enum attribute (an ASCII code as an integer) as its character."""
    if name not in attrs:
        raise CompileError(f"{inst.attributes.custom_call_target}: missing attribute {name!r}", inst)
    value = attrs[name]
    c = chr(value) if type(value) is int and 0 <= value < 128 else ""
    if not c or c not in allowed:
        raise CompileError(f"{inst.attributes.custom_call_target}: attribute {name} = {value!r} is not one of "
                           f"{', '.join(map(repr, allowed))} (as ASCII codes)", inst)
    return c


def _no_attrs(attrs: Attrs, inst: Any) -> dict:
    return {}


def _trsm(attrs: Attrs, inst: Any) -> dict:
    return {"left_side": _char(attrs, "side", "LR", inst) == "L", "lower": _char(attrs, "uplo", "LU", inst) == "L",
            "transpose": _char(attrs, "trans_x", "NTC", inst), "unit_diagonal": _char(attrs, "diag", "NU", inst) == "U"}


def _uplo(attrs: Attrs, inst: Any) -> dict:
    return {"lower": _char(attrs, "uplo", "LU", inst) == "L"}


def _syevd(attrs: Attrs, inst: Any) -> dict:
    return {"lower": _char(attrs, "uplo", "LU", inst) == "L", "vectors": _char(attrs, "mode", "VN", inst) == "V"}


def _svd(driver: str) -> Callable[[Attrs, Any], dict]:
    def attrs_of(attrs: Attrs, inst: Any) -> dict:
        # mode O (overwrite a with part of u) is refused by jaxlib's kernel as well
        return {"driver": driver, "job": _char(attrs, "mode", "ASN", inst)}
    return attrs_of


def _typed(attrs: Attrs, name: str, kind: type, inst: Any) -> Any:
    """A jaxlib attribute that must be an integer (lapack_int, i32) or a bool (MLIR true/false)."""
    value = attrs.get(name)
    if type(value) is not kind:
        what = "true or false" if kind is bool else "an integer"
        raise CompileError(f"{inst.attributes.custom_call_target}: attribute {name!r} must be {what}, "
                           f"found {value!r}", inst)
    return value


def _gees(attrs: Attrs, inst: Any) -> dict:
    if _char(attrs, "sort", "NS", inst) != "N":  # jaxlib's kernel refuses it too (no select function)
        raise CompileError(f"{inst.attributes.custom_call_target}: sorted Schur forms (sort = S) are not "
                           f"implemented, in jaxlib either", inst)
    return {"vectors": _char(attrs, "mode", "VN", inst) == "V"}


def _gehrd(attrs: Attrs, inst: Any) -> dict:
    n = inst.operands[0].shape.dimensions[-1]
    low, high = _typed(attrs, "low", int, inst), _typed(attrs, "high", int, inst)
    if not (1 <= low <= max(1, n) and min(low, n) <= high <= n):  # LAPACK's ILO/IHI rule
        raise CompileError(f"{inst.attributes.custom_call_target}: low = {low}, high = {high} out of range for "
                           f"n = {n} (1 <= low <= max(1, n), min(low, n) <= high <= n)", inst)
    return {"low": low, "high": high}


def _ormqr(attrs: Attrs, inst: Any) -> dict:
    return {"left": _typed(attrs, "left", bool, inst), "transpose": _typed(attrs, "transpose", bool, inst)}


def _geev(attrs: Attrs, inst: Any) -> dict:
    return {"left": _char(attrs, "compute_left", "VN", inst) == "V",
            "right": _char(attrs, "compute_right", "VN", inst) == "V"}


@dataclass(frozen=True)
class Routine:
    """How one LAPACK routine lowers: the emulator op, its attributes, and the call's form."""

    op: str
    attrs: Callable[[Attrs, Any], dict]
    operands: int
    results: int  # leaves of the result tuple (1: the result is an array)
    rank: int = 2  # least rank of the first operand (1: a batch of vectors, gtsv's dl)


_REAL_AND_COMPLEX = (False, True)

#: (LAPACK routine without prefix, complex element type?) -> lowering. Some routines exist for
#: one kind only (orgqr is real, ungqr complex), and complex geev has one eigenvalue output.
ROUTINES: dict[tuple[str, bool], Routine] = {
    **{("getrf", c): Routine("lapack_getrf", _no_attrs, 1, 3) for c in _REAL_AND_COMPLEX},
    **{("trsm", c): Routine("lapack_trsm", _trsm, 2, 1) for c in _REAL_AND_COMPLEX},
    **{("potrf", c): Routine("lapack_potrf", _uplo, 1, 2) for c in _REAL_AND_COMPLEX},
    ("syevd", False): Routine("lapack_syevd", _syevd, 1, 3),
    ("heevd", True): Routine("lapack_syevd", _syevd, 1, 3),
    **{("gesdd", c): Routine("lapack_gesvd", _svd("gesdd"), 1, 5) for c in _REAL_AND_COMPLEX},
    **{("gesvd", c): Routine("lapack_gesvd", _svd("gesvd"), 1, 5) for c in _REAL_AND_COMPLEX},
    **{("geqrf", c): Routine("lapack_geqrf", _no_attrs, 1, 2) for c in _REAL_AND_COMPLEX},
    ("orgqr", False): Routine("lapack_orgqr", _no_attrs, 2, 1),
    ("ungqr", True): Routine("lapack_orgqr", _no_attrs, 2, 1),
    ("geev", False): Routine("lapack_geev", _geev, 1, 5),  # wr, wi, vl, vr, info
    ("geev", True): Routine("lapack_geev", _geev, 1, 4),   # w, vl, vr, info
    ("gees", False): Routine("lapack_gees", _gees, 1, 6),  # t, vs, wr, wi, sdim, info
    ("gees", True): Routine("lapack_gees", _gees, 1, 5),   # t, vs, w, sdim, info
    **{("gehrd", c): Routine("lapack_gehrd", _gehrd, 1, 3) for c in _REAL_AND_COMPLEX},
    ("sytrd", False): Routine("lapack_sytrd", _uplo, 1, 5),  # a', d, e, tau, info; attribute uplo
    ("hetrd", True): Routine("lapack_sytrd", _uplo, 1, 5),
    **{("geqp3", c): Routine("lapack_geqp3", _no_attrs, 2, 3) for c in _REAL_AND_COMPLEX},
    ("ormqr", False): Routine("lapack_ormqr", _ormqr, 3, 1),
    ("unmqr", True): Routine("lapack_ormqr", _ormqr, 3, 1),
    **{("gtsv", c): Routine("lapack_gtsv", _no_attrs, 4, 5, rank=1) for c in _REAL_AND_COMPLEX},
}

#: jaxlib's one CPU linear-algebra kernel outside LAPACK's naming (jaxlib/cpu/tridiagonal_solve_kernels.cc:
#: tridiagonal_solve with perturb_singular=True, which eigh_tridiagonal uses); any of the four types.
PERTURBED_TRIDIAGONAL_SOLVE = "tridiagonal_solve_perturbed_ffi"
_PERTURBED = Routine("tridiagonal_solve_perturbed", _no_attrs, 4, 1, rank=1)
_ELEMENT_TYPES = frozenset(_ELEMENT_TYPE.values())


#: XLA's own linear-algebra custom-calls, which its QrExpander (and XLA:CPU) expands: `Qr` is
#: geqrf's compact form (a' = R above the diagonal and the Householder vectors below it, taus),
#: `ProductOfElementaryHouseholderReflectors` is orgqr/ungqr (the first n columns of Q). They
#: follow LAPACK's conventions (XLA's House() is dlarfg's), so LAPACK's routines compute them.
XLA_LINALG_TARGETS: dict[str, Routine] = {
    "Qr": Routine("lapack_geqrf", _no_attrs, 1, 2),
    "ProductOfElementaryHouseholderReflectors": Routine("lapack_orgqr", _no_attrs, 2, 1),
}


def lower_xla_linalg(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    """The emulator op for XLA's `Qr` or `ProductOfElementaryHouseholderReflectors` custom-call."""
    target = inst.attributes.custom_call_target
    routine = XLA_LINALG_TARGETS[target]
    shapes = [o.shape for o in inst.operands]
    a = shapes[0] if shapes else None
    if len(shapes) != routine.operands or a.is_tuple or a.element_type not in _ELEMENT_TYPES or a.rank < 2:
        raise CompileError(f"custom-call {target} takes {routine.operands} operand(s), the first a batch of F32, "
                           f"F64, C64 or C128 matrices; found {', '.join(map(str, shapes)) or 'none'}", inst)
    m, n = a.dimensions[-2:]
    batch, k = tuple(a.dimensions[:-2]), min(m, n)
    if target == "Qr":
        want = [(a.element_type, tuple(a.dimensions)), (a.element_type, batch + (k,))]
    else:
        if m < n:
            raise CompileError(f"custom-call {target} of {m}x{n} matrices: orgqr needs m >= n", inst)
        taus = shapes[1]
        if taus.element_type != a.element_type or tuple(taus.dimensions) != batch + (taus.dimensions[-1],) \
                or not 0 <= taus.dimensions[-1] <= n:
            raise CompileError(f"custom-call {target}: taus {taus} do not fit {a}", inst)
        want = [(a.element_type, tuple(a.dimensions))]
    got = [(s.element_type, tuple(s.dimensions)) for s in (inst.shape.tuple_shapes if inst.shape.is_tuple
                                                              else [inst.shape])]
    if got != want or inst.shape.is_tuple != (routine.results > 1):
        raise CompileError(f"custom-call {target} of {a} gives {want}, the call declares {inst.shape}", inst)
    return routine.op, {}


def is_lapack_target(target: str) -> bool:
    """Whether `target` names one of jaxlib's CPU linear-algebra kernels (supported or not)."""
    return _TARGET.match(target) is not None or target == PERTURBED_TRIDIAGONAL_SOLVE


def lower_lapack(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    """The emulator op for a `lapack_*_ffi` custom-call; CompileError for routines not lowered."""
    target = inst.attributes.custom_call_target
    m = _TARGET.match(target)
    if target == PERTURBED_TRIDIAGONAL_SOLVE:
        routine = _PERTURBED
        element_type = inst.operands[0].shape.element_type if inst.operands else ""
        element_type = element_type if element_type in _ELEMENT_TYPES else "F32, F64, C64 or C128"
    elif m is None:
        raise CompileError(f"custom-call target {target!r} is not a LAPACK kernel", inst)
    else:
        prefix, name = m.groups()
        routine = ROUTINES.get((name, prefix in "cz"))
        if routine is None:
            raise CompileError(f"custom-call target {target!r} (LAPACK {prefix}{name}) is not supported; supported "
                               f"routines: {', '.join(sorted({k for k, _ in ROUTINES}))} (see "
                               f"neuron_customcall/compiler/lowering/lapack.py, ROUTINES)", inst)
        element_type = _ELEMENT_TYPE[prefix]
    api = int(inst.attributes.custom_call_api_version)
    if api != API_VERSION_TYPED_FFI:
        raise CompileError(f"{target}: expected api_version=API_VERSION_TYPED_FFI, found {api}", inst)
    operand = inst.operands[0].shape if inst.operands else None
    if len(inst.operands) != routine.operands or operand.is_tuple or operand.element_type != element_type \
            or len(operand.dimensions) < routine.rank:
        kind = "matrices" if routine.rank == 2 else "vectors"
        raise CompileError(f"{target} takes {routine.operands} operand(s), the first a batch of {element_type} "
                           f"{kind}", inst)
    leaves = len(inst.shape.tuple_shapes) if inst.shape.is_tuple else 1
    if leaves != routine.results or (routine.results == 1) == inst.shape.is_tuple:
        raise CompileError(f"{target} returns {routine.results} value(s), this call {leaves}", inst)
    attrs = parse_ffi_attributes(inst.attributes.backend_config, inst)
    return routine.op, routine.attrs(attrs, inst)
