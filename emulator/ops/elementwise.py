"""Element-wise ops with XLA's semantics where NumPy's differ.

Differences handled here: integer division truncates toward zero and x/0 is -1 (all ones for
unsigned), INT_MIN/-1 is INT_MIN, x%0 is x; shifts by >= the bit width give 0 (or the sign fill
for arithmetic right shift); integer power with negative exponents; round-half-away-from-zero;
sign keeps -0 and NaN; TOTALORDER comparison of floats; narrow floats computed in f32; complex
functions with XLA's formulas at infinities and NaNs (complex_math).
"""
from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from emulator.ops.common import F32, NARROW, compute_dtype
from emulator.ops.complex_math import COMPLEX_FUNCTIONS
from emulator.program.context import HandlerContext
from emulator.program.ops import Factory, handles


def _in_place(ctx: HandlerContext, f: Callable) -> bool:
    """Whether f (a ufunc) may write into operand `ctx.reuse`: same dtype and shape as the result,
    and the compiler proved the buffer dead and owned (emulator/program: `reuse`)."""
    k = ctx.reuse
    return (k >= 0 and isinstance(f, np.ufunc) and ctx.shape != () and ctx.dtype not in NARROW
            and ctx.in_dtype(k) == ctx.dtype and ctx.in_shape(k) == ctx.shape)


def _float_unary(f: Callable[[np.ndarray], np.ndarray]) -> Factory:
    def make(ctx: HandlerContext) -> Callable:
        dt = ctx.dtype
        if _in_place(ctx, f):
            return lambda x: f(x, out=x)
        cdt = compute_dtype(ctx.in_dtype(0))
        if cdt != ctx.in_dtype(0):
            return lambda x: f(x.astype(cdt)).astype(dt)
        if dt != cdt:
            return lambda x: np.asarray(f(x)).astype(dt)
        return f
    return make


def _round_afz(x: np.ndarray) -> np.ndarray:
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t).astype(x.dtype)


def _sign(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind in "iu":
        return np.sign(x)
    return np.where((x == 0) | np.isnan(x), x, np.copysign(np.ones_like(x), x))


_ERF_A = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
          -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)
_ERF_B = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
          -1.42647390514189e-02)
_math_erf = np.frompyfunc(math.erf, 1, 1)


def _erf(x: np.ndarray) -> np.ndarray:
    """f32: the rational approximation XLA/Eigen use; f64: libm's erf (exact, not vectorised)."""
    if x.dtype == np.float64:
        return np.asarray(_math_erf(x), dtype=np.float64)
    x = np.clip(x, np.float32(-4), np.float32(4))
    x2 = x * x
    p = np.float32(_ERF_A[0])
    for c in _ERF_A[1:]:
        p = p * x2 + np.float32(c)
    q = np.float32(_ERF_B[0])
    for c in _ERF_B[1:]:
        q = q * x2 + np.float32(c)
    return (x * p / q).astype(x.dtype)


def _logistic(x: np.ndarray) -> np.ndarray:
    one = np.ones((), x.dtype)
    return one / (one + np.exp(-x))


def _clz(x: np.ndarray) -> np.ndarray:
    bits = x.dtype.itemsize * 8
    u = x.view(np.dtype(f"u{x.dtype.itemsize}")) if x.dtype.kind == "i" else x
    u = np.asarray(u).copy()
    n = np.zeros(u.shape, np.int64)
    s = bits // 2
    while s >= 1:
        m = (u >> np.asarray(bits - s, u.dtype)) == 0
        n += np.where(m, s, 0)
        u = np.where(m, u << np.asarray(s, u.dtype), u)
        s //= 2
    n += np.where((u >> np.asarray(bits - 1, u.dtype)) == 0, 1, 0)
    return n.astype(x.dtype)


@handles("not")
def _not(ctx: HandlerContext) -> Callable:
    return np.logical_not if ctx.dtype == np.bool_ else np.invert


@handles("popcnt")
def _popcnt(ctx: HandlerContext) -> Callable:
    dt = ctx.dtype
    udt = np.dtype(f"u{dt.itemsize}") if dt.kind == "i" else dt
    return lambda x: np.bitwise_count(np.asarray(x).view(udt)).astype(dt)


@handles("is-finite")
def _is_finite(ctx: HandlerContext) -> Callable:
    cdt = compute_dtype(ctx.in_dtype(0))
    return lambda x: np.isfinite(np.asarray(x).astype(cdt, copy=False))



@handles("copy")
def _copy(ctx: HandlerContext) -> Callable:
    return lambda x: x


@handles("real")
def _real(ctx: HandlerContext) -> Callable:
    dt = ctx.dtype
    return lambda x: np.real(x).astype(dt)


@handles("imag")
def _imag(ctx: HandlerContext) -> Callable:
    dt = ctx.dtype
    return lambda x: np.imag(x).astype(dt)


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return (np.ones((), x.dtype) / np.sqrt(x)).astype(x.dtype)


# -- binary ------------------------------------------------------------------------------------
#: Scalar (shape ()) arithmetic through NumPy's scalar operators: same result dtype and values as
#: the ufunc, about 45 ns instead of 800 (a ufunc call on scalars converts them to arrays first).
#: Loop counters and the scalar math of while bodies pay this on every iteration.
_SCALAR_OPS: dict[Any, Callable] = {np.add: operator.add, np.subtract: operator.sub, np.multiply: operator.mul,
                                    np.equal: operator.eq, np.not_equal: operator.ne, np.less: operator.lt,
                                    np.less_equal: operator.le, np.greater: operator.gt,
                                    np.greater_equal: operator.ge}


def _arith(f: Callable) -> Factory:
    """Binary arithmetic; narrow floats go through f32 and round once, as XLA:CPU does."""
    def make(ctx: HandlerContext) -> Callable:
        dt = ctx.dtype
        if _in_place(ctx, f) and ctx.in_dtype(1 - ctx.reuse) == dt:
            if ctx.reuse == 0:
                return lambda a, b: f(a, b, out=a)
            return lambda a, b: f(a, b, out=b)
        if dt in NARROW:
            return lambda a, b: f(a.astype(F32), b.astype(F32)).astype(dt)
        if ctx.in_dtype(0) == dt and ctx.in_dtype(1) == dt and isinstance(f, np.ufunc):
            if ctx.shape == () and f in _SCALAR_OPS and dt.kind in "iufc":
                return _SCALAR_OPS[f]
            return f  # same-dtype ufunc: NumPy keeps the dtype (0-d results are NumPy scalars)
        return lambda a, b: np.asarray(f(a, b)).astype(dt, copy=False)
    return make


def _int_div(dt: np.dtype) -> Callable:
    signed = dt.kind == "i"
    info = np.iinfo(dt)

    def div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        zero = b == 0
        bad = zero | ((a == info.min) & (b == -1)) if signed else zero
        bs = np.where(bad, np.ones((), dt), b)
        q = (a - np.fmod(a, bs)) // bs
        q = np.where((a == info.min) & (b == -1), a, q) if signed else q
        return np.where(zero, np.asarray(-1 if signed else info.max, dt), q).astype(dt, copy=False)
    return div


def _int_rem(dt: np.dtype) -> Callable:
    signed = dt.kind == "i"
    info = np.iinfo(dt)

    def rem(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        bad = (b == 0) | ((a == info.min) & (b == -1)) if signed else (b == 0)
        r = np.fmod(a, np.where(bad, np.ones((), dt), b))
        r = np.where(b == 0, a, r)
        if signed:
            r = np.where((a == info.min) & (b == -1), np.zeros((), dt), r)
        return r.astype(dt, copy=False)
    return rem


def _int_or_float(int_impl: Callable[[np.dtype], Callable], float_impl: Callable) -> Factory:
    """Integer semantics of XLA for integer dtypes, NumPy's (via _arith) for floats."""
    def make(ctx: HandlerContext) -> Callable:
        if ctx.dtype.kind in "iu":
            return int_impl(ctx.dtype)
        return _arith(float_impl)(ctx)
    return make


def _int_pow(dt: np.dtype) -> Callable:
    def pw(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = np.broadcast_arrays(np.asarray(a, dt), np.asarray(b, dt))
        e = np.where(b < 0, 0, b) if dt.kind == "i" else b.copy()
        r = np.ones(a.shape, dt)
        base = a.copy()
        while np.any(e > 0):
            r = np.where((e & 1) == 1, r * base, r)
            base = base * base
            e = e >> 1
        if dt.kind == "i":
            neg = b < 0
            r = np.where(neg, np.where(a == 1, 1, np.where(a == -1, np.where((b & 1) == 1, -1, 1), 0)), r)
        return r.astype(dt)
    return pw


def _shift(kind: str) -> Factory:
    def make(ctx: HandlerContext) -> Callable:
        dt = ctx.dtype
        bits = dt.itemsize * 8
        udt = np.dtype(f"u{dt.itemsize}")
        sdt = np.dtype(f"i{dt.itemsize}")

        def shift(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            a = np.asarray(a, dt)
            bu = np.asarray(b, dt).view(udt)
            oob = bu >= bits
            s = np.where(oob, 0, bu).astype(udt)
            if kind == "left":
                r = (a.view(udt) << s).view(dt)
                return np.where(oob, np.zeros((), dt), r)
            if kind == "logical":
                r = (a.view(udt) >> s).view(dt)
                return np.where(oob, np.zeros((), dt), r)
            sa = a.view(sdt)
            r = (sa >> s.astype(sdt)).view(dt)
            fill = np.where(sa < 0, -1, 0).astype(sdt).view(dt)
            return np.where(oob, fill, r)
        return shift
    return make


def _logic(fb: Callable, fi: Callable) -> Factory:
    def make(ctx: HandlerContext) -> Callable:
        return fb if ctx.dtype == np.bool_ else fi
    return make


@handles("complex")
def _complex(ctx: HandlerContext) -> Callable:
    dt = ctx.dtype
    return lambda a, b: (np.asarray(a) + 1j * np.asarray(b)).astype(dt)


def _minmax(f: Callable) -> Factory:
    def make(ctx: HandlerContext) -> Callable:
        if ctx.dtype == np.bool_:
            return np.logical_or if f is np.maximum else np.logical_and
        return _arith(f)(ctx)
    return make


# -- compare, select, clamp --------------------------------------------------------------------
_CMP = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal, "GT": np.greater,
        "GE": np.greater_equal}


def total_order_key(x: np.ndarray) -> np.ndarray:
    """Signed integers ordered as XLA's TOTALORDER orders floats (-NaN < -inf < -0 < +0 < NaN)."""
    x = np.asarray(x)
    if x.dtype.kind not in "fV":
        return x
    sdt = np.dtype(f"i{x.dtype.itemsize}")
    i = x.view(sdt)
    key = i >> (8 * x.dtype.itemsize - 1)  # all ones where the sign bit is set: flip the magnitude
    key &= np.asarray(np.iinfo(sdt).max, sdt)
    key ^= i
    return key


@handles("compare")
def _compare(ctx: HandlerContext) -> Callable:
    f = _CMP[ctx.attrs["direction"]]
    if ctx.attrs["total_order"] and ctx.in_dtype(0).kind in "fV":
        return lambda a, b: f(total_order_key(a), total_order_key(b))
    if ctx.in_dtype(0).kind == "c" and ctx.attrs["direction"] not in ("EQ", "NE"):
        raise ValueError("ordered comparison of complex numbers")
    if ctx.shape == () and ctx.in_dtype(0) == ctx.in_dtype(1) and ctx.in_dtype(0).kind in "iuf" \
            and ctx.in_dtype(0) not in NARROW:
        return _SCALAR_OPS[f]
    return f


#: Smallest select (elements) worth the bitwise path; below it np.where's call is cheaper.
_BITWISE_SELECT_MIN = 4096


def _bitwise_select(dt: np.dtype, reuse: int) -> Callable:
    """select(p, a, b) as (a & m) | (b & ~m) on the bits, m = all ones where p: exact for every
    value (NaNs and signed zeros included), branch-free, and about 4x faster than np.where on
    unpredictable masks (relu gradients), whose per-element branches mispredict. `reuse` (1 or 2)
    names the branch whose buffer receives the result."""
    ut = np.dtype(f"u{dt.itemsize}")

    def select(p: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        m = np.asarray(p).astype(ut)
        np.negative(m, out=m)  # 1 -> all ones
        ab, bb = np.asarray(a).view(ut), np.asarray(b).view(ut)
        out = ab if reuse == 1 else bb if reuse == 2 else None
        r = np.bitwise_and(ab, m, out=out if reuse == 1 else None)
        np.invert(m, out=m)
        np.bitwise_and(bb, m, out=m)
        if reuse == 2:
            np.bitwise_or(r, m, out=bb)
            return bb.view(dt)
        np.bitwise_or(r, m, out=r)
        return r.view(dt)
    return select


def where(p: np.ndarray, a: Any, b: Any) -> np.ndarray:
    """np.where(p, a, b), bitwise (_bitwise_select) when that is exact and pays: same dtype of 1,
    2, 4 or 8 bytes, a predicate of the result's shape and at least _BITWISE_SELECT_MIN elements.
    For other handlers' selections (select-and-scatter)."""
    p, a, b = np.asarray(p), np.asarray(a), np.asarray(b)
    dt = a.dtype
    if dt != b.dtype or dt.itemsize not in (1, 2, 4, 8) or dt.kind == "c" or p.size < _BITWISE_SELECT_MIN \
            or p.dtype != np.bool_ or np.broadcast_shapes(p.shape, a.shape, b.shape) != p.shape:
        return np.where(p, a, b)
    return _bitwise_select(dt, -1)(p, a, b)


def _scalar_select(p: Any, a: Any, b: Any) -> Any:
    """A select declared on scalars (loop bodies' clamps and counters): 60 ns instead of
    np.where's 2 us when the predicate is a NumPy bool. No scalar result is ever overwritten in
    place (buffers.choose_reuse), so returning an operand is safe. Lifted element-wise
    computations declare scalars but run on whole arrays (a branch may then be an array while
    the predicate is a constant): those go to np.where, which broadcasts."""
    if type(p) is np.bool_ and not getattr(a, "ndim", 0) and not getattr(b, "ndim", 0):
        return a if p else b
    return np.where(p, a, b)


@handles("select")
def _select(ctx: HandlerContext) -> Callable:
    """np.where, or, when the compiler lets the result reuse a branch operand's buffer, a masked
    copy of the other branch into it (relu gradients on large activations); large selects of
    1/2/4/8-byte elements go bitwise (_bitwise_select)."""
    k = ctx.reuse
    can_reuse = k in (1, 2) and ctx.shape != () and ctx.in_shape(k) == ctx.shape and ctx.in_dtype(k) == ctx.dtype \
        and ctx.in_shape(3 - k) == ctx.shape
    if math.prod(ctx.shape) >= _BITWISE_SELECT_MIN and ctx.dtype.itemsize in (1, 2, 4, 8) \
            and ctx.dtype.kind != "c" and ctx.in_shape(0) == ctx.shape and all(
                ctx.in_dtype(i) == ctx.dtype for i in (1, 2)):
        return _bitwise_select(ctx.dtype, k if can_reuse else -1)
    if ctx.shape == ():
        return _scalar_select
    if can_reuse:
        if k == 1:
            return lambda p, a, b: (np.copyto(a, b, where=~np.asarray(p, bool)), a)[1]
        return lambda p, a, b: (np.copyto(b, a, where=np.asarray(p, bool)), b)[1]
    return np.where


@handles("clamp")
def _clamp(ctx: HandlerContext) -> Callable:
    dt = ctx.dtype
    return lambda lo, x, hi: np.minimum(np.maximum(x, lo), hi).astype(dt, copy=False)


def _or_complex(name: str, real: Factory) -> Factory:
    """The real factory, or XLA's complex formula (complex_math) for complex operands."""
    fn = COMPLEX_FUNCTIONS[name]

    def make(ctx: HandlerContext) -> Callable:
        return fn if ctx.in_dtype(0).kind == "c" else real(ctx)
    return make


#: Handlers made by the factories above: op name -> handler factory (registered below).
_MADE: dict[str, Factory] = {
    "abs": _float_unary(np.abs), "negate": _float_unary(np.negative), "exponential": _float_unary(np.exp),
    "exponential-minus-one": _float_unary(np.expm1), "log": _float_unary(np.log),
    "log-plus-one": _float_unary(np.log1p), "sqrt": _float_unary(np.sqrt), "rsqrt": _float_unary(_rsqrt),
    "cbrt": _float_unary(np.cbrt), "tanh": _float_unary(np.tanh), "logistic": _float_unary(_logistic),
    "sine": _float_unary(np.sin), "cosine": _float_unary(np.cos), "tan": _float_unary(np.tan),
    "floor": _float_unary(np.floor), "ceil": _float_unary(np.ceil), "round-nearest-afz": _float_unary(_round_afz),
    "round-nearest-even": _float_unary(np.rint), "sign": _float_unary(_sign),
    "count-leading-zeros": lambda ctx: _clz, "erf": _float_unary(_erf), "add": _arith(np.add),
    "subtract": _arith(np.subtract), "multiply": _arith(np.multiply), "divide": _int_or_float(_int_div, np.divide),
    "remainder": _int_or_float(_int_rem, np.fmod), "maximum": _minmax(np.maximum), "minimum": _minmax(np.minimum),
    "power": _int_or_float(_int_pow, np.power), "atan2": _arith(np.arctan2),
    "and": _logic(np.logical_and, np.bitwise_and), "or": _logic(np.logical_or, np.bitwise_or),
    "xor": _logic(np.logical_xor, np.bitwise_xor), "shift-left": _shift("left"),
    "shift-right-arithmetic": _shift("arithmetic"), "shift-right-logical": _shift("logical"),
}
for _name, _factory in _MADE.items():  # complex operands take XLA's complex formula where one exists
    handles(_name)(_or_complex(_name, _factory) if _name in COMPLEX_FUNCTIONS else _factory)
