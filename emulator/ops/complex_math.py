"""Complex element functions with XLA's formulas, so that infinities, NaNs, overflow and underflow
come out as they do on XLA:CPU rather than as NumPy's (C99 Annex G) answers.

NumPy and XLA agree on finite, well-scaled values but not at the edges: XLA divides by Smith's
algorithm with explicit recovery of zero and infinite denominators ((1+1j)/(nan+inf j) is 0-0j on
XLA and NaN+NaN j in NumPy), takes |z| as max*sqrt(1+(min/max)^2) with NaN propagation, builds
sqrt/rsqrt/log/pow from |z| and atan2, and sin/cos/tan/tanh/expm1/log1p from real exp, sin and cos
with its own special cases. Each function here is written from the formula XLA's elemental IR
emitter documents for that opcode (openxla/xla, service/elemental_ir_emitter.cc) and checked
against XLA:CPU on grids of special values (tests/emulator/ops/test_complex_math.py).

Known differences that remain (docs/emulator.md): XLA:CPU's transcendental approximations (a few
ulp), fused multiply-adds where XLA contracts a multiply into an add, results that depend on the
sign of a zero input (XLA:CPU's code ignores it: sqrt(-1-0j) is +1j there and -1j here, as in C99),
subnormal inputs, the direction of an overflowing power (the angle of (1+1j)^1e30 is
c*t reduced mod 2pi from a huge product, which no two libms agree on) and log1p just off -1
(-1 - 1e-30j in f64).

All functions take and return arrays of one complex dtype and compute in its component dtype.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

Fn = Callable[..., np.ndarray]


def _compose(re: np.ndarray, im: np.ndarray, dt: np.dtype) -> np.ndarray:
    out = np.empty(np.broadcast_shapes(np.shape(re), np.shape(im)), dt)
    out.real = re
    out.imag = im
    return out


def _parts(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    z = np.asarray(z)
    return z.real, z.imag


def _c(x: float, like: np.ndarray) -> np.generic:
    """A constant in the component dtype (keeps f32 math in f32)."""
    return like.dtype.type(x)


def _abs_parts(re: np.ndarray, im: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(min, max, 1 + (min/max)^2) of |re|, |im|: the scaled hypot XLA uses for |z|, sqrt|z| and
    rsqrt|z| (no overflow for huge parts). max/min propagate NaN, as XLA's float max/min do."""
    ar, ai = np.abs(re), np.abs(im)
    mx = np.maximum(ar, ai)
    mn = np.minimum(ar, ai)
    div = mn / mx
    return mn, mx, _c(1, re) + div * div


def abs_(z: np.ndarray) -> np.ndarray:
    """|z| = max * sqrt(1 + (min/max)^2); where that is NaN ((0,0), (inf,inf), a NaN part), min."""
    re, im = _parts(z)
    mn, mx, one_p = _abs_parts(re, im)
    r = mx * np.sqrt(one_p)
    return np.where(np.isnan(r), mn, r)


def _sqrt_abs(re: np.ndarray, im: np.ndarray) -> np.ndarray:
    mn, mx, one_p = _abs_parts(re, im)
    r = np.sqrt(mx) * np.power(one_p, _c(0.25, re))
    return np.where(np.isnan(r), mn, r)


def _rsqrt_abs(re: np.ndarray, im: np.ndarray) -> np.ndarray:
    mn, mx, one_p = _abs_parts(re, im)
    one = _c(1, re)
    r = (one / np.sqrt(mx)) * (one / np.sqrt(np.sqrt(one_p)))
    return np.where(np.isnan(r), one / np.sqrt(mn), r)


def divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Smith's algorithm; where it gives NaN+NaN j, XLA's three recoveries: a zero denominator
    (inf with b_r's sign times the numerator), an infinite numerator over a finite denominator,
    a finite numerator over an infinite denominator (signed zeros)."""
    dt = np.result_type(x, y)
    ar, ai = _parts(x)
    br, bi = _parts(y)
    zero, one, inf = _c(0, ar), _c(1, ar), _c(np.inf, ar)
    rb = br / bi
    db = bi + rb * br
    ib = bi / br
    dr = br + ib * bi
    abr, abi = np.abs(br), np.abs(bi)
    lt = abr < abi
    cr = np.where(lt, (rb * ar + ai) / db, (ib * ai + ar) / dr)
    ci = np.where(lt, (rb * ai - ar) / db, (ai - ib * ar) / dr)
    nan = np.isnan(cr) & np.isnan(ci)
    if not nan.any():
        return _compose(cr, ci, dt)
    # case 1: zero denominator, numerator not all NaN
    zden = (abr == 0) & (abi == 0) & (~np.isnan(ar) | ~np.isnan(ai))
    inf_b = np.copysign(inf, br)
    z_r, z_i = inf_b * ar, inf_b * ai
    # case 2: infinite numerator, finite denominator
    aar, aai = np.abs(ar), np.abs(ai)
    ar_inf, ai_inf = aar == inf, aai == inf
    br_fin, bi_fin = (abr != inf) & ~np.isnan(br), (abi != inf) & ~np.isnan(bi)
    inf_num = (ar_inf | ai_inf) & br_fin & bi_fin
    sar = np.copysign(np.where(ar_inf, one, zero), ar)
    sai = np.copysign(np.where(ai_inf, one, zero), ai)
    n_r = inf * (sar * br + sai * bi)
    n_i = inf * (sai * br - sar * bi)
    # case 3: finite numerator, infinite denominator
    ar_fin, ai_fin = (aar != inf) & ~np.isnan(ar), (aai != inf) & ~np.isnan(ai)
    br_inf, bi_inf = abr == inf, abi == inf
    inf_den = (br_inf | bi_inf) & ar_fin & ai_fin
    sbr = np.copysign(np.where(br_inf, one, zero), br)
    sbi = np.copysign(np.where(bi_inf, one, zero), bi)
    f_r = zero * (ar * sbr + ai * sbi)
    f_i = zero * (ai * sbr - ar * sbi)
    rr = np.where(zden, z_r, np.where(inf_num, n_r, np.where(inf_den, f_r, cr)))
    ri = np.where(zden, z_i, np.where(inf_num, n_i, np.where(inf_den, f_i, ci)))
    return _compose(np.where(nan, rr, cr), np.where(nan, ri, ci), dt)


def sign(z: np.ndarray) -> np.ndarray:
    """z / |z|, and 0 where |z| == 0."""
    re, im = _parts(z)
    a = abs_(z)
    zero = _c(0, re)
    is0 = a == 0
    return _compose(np.where(is0, zero, re / a), np.where(is0, zero, im / a), np.asarray(z).dtype)


def sqrt(z: np.ndarray) -> np.ndarray:
    """sqrt|z| * (cos(t/2) + i sin(t/2)), t = atan2(b, a), with XLA's infinity cases."""
    a, b = _parts(z)
    zero, inf = _c(0, a), _c(np.inf, a)
    r = _sqrt_abs(a, b)
    half = np.arctan2(b, a) * _c(0.5, a)
    cos, sin = np.cos(half), np.sin(half)
    ab = np.abs(b)
    real = np.where((ab == inf) | (a == inf), inf, np.where((a == -inf) & (ab != inf), zero, r * cos))
    imag = np.where((ab == inf) | (a == -inf), np.copysign(inf, b),
                    np.where(np.isnan(r), np.nan, np.where(sin == 0, sin, r * sin)))
    is0 = r == 0
    real, imag = np.where(is0, zero, real), np.where(is0, zero, imag)
    nan = np.isnan(a) | np.isnan(b)  # XLA:CPU: a NaN part makes both parts NaN, infinities too
    return _compose(np.where(nan, np.nan, real), np.where(nan, np.nan, imag), np.asarray(z).dtype)


def rsqrt(z: np.ndarray) -> np.ndarray:
    """rsqrt|z| * (cos(-t/2) + i sin(-t/2)), with XLA's zero, infinity and NaN cases."""
    a, b = _parts(z)
    zero, inf = _c(0, a), _c(np.inf, a)
    r = _rsqrt_abs(a, b)
    ang = np.arctan2(b, a) * _c(-0.5, a)
    real, imag = r * np.cos(ang), r * np.sin(ang)
    aa, ab = np.abs(a), np.abs(b)
    both0 = (a == 0) & (b == 0)
    to_zero = ((ab == inf) & np.isnan(a)) | (aa == inf)
    real = np.where(both0, inf, np.where(to_zero, np.copysign(zero, a), real))
    imag = np.where(both0, np.nan, np.where(to_zero, -np.copysign(zero, b), imag))
    return _compose(real, imag, np.asarray(z).dtype)


def exp(z: np.ndarray) -> np.ndarray:
    """e^a * (cos b + i sin b), a real argument staying real (exp(inf + 0j) is inf + 0j, not
    inf + NaN j), no other special case (exp(inf + inf j) is NaN + NaN j, as on XLA:CPU)."""
    a, b = _parts(z)
    ea = np.exp(a)
    return _compose(ea * np.cos(b), np.where(b == 0, b, ea * np.sin(b)), np.asarray(z).dtype)


#: Cephes' cosm1 polynomial in x^2 (the coefficients XLA uses), for |x| < pi/4.
_COSM1 = (4.7377507964246204691685e-14, -1.1470284843425359765671e-11, 2.0876754287081521758361e-9,
          -2.7557319214999787979814e-7, 2.4801587301570552304991e-5, -1.3888888888888872993737e-3,
          4.1666666666666666609054e-2)


def _cosm1(x: np.ndarray) -> np.ndarray:
    """cos(x) - 1 without cancellation for small x."""
    x2 = x * x
    p = _c(_COSM1[0], x)
    for c in _COSM1[1:]:
        p = p * x2 + _c(c, x)
    small = x2 * x2 * p - _c(0.5, x) * x2
    return np.where(x2 >= _c(0.61685, x), np.cos(x) - _c(1, x), small)


def expm1(z: np.ndarray) -> np.ndarray:
    """(expm1(a) cos b + cosm1(b)) + i e^a sin b, imaginary part 0 where b == 0."""
    a, b = _parts(z)
    em1 = np.expm1(a)
    cm1 = _cosm1(b)
    real = em1 * (cm1 + _c(1, a)) + cm1
    imag = np.where(b == 0, _c(0, a), (em1 + _c(1, a)) * np.sin(b))
    return _compose(real, imag, np.asarray(z).dtype)


def log(z: np.ndarray) -> np.ndarray:
    """log|z| + i atan2(b, a)."""
    a, b = _parts(z)
    return _compose(np.log(abs_(z)), np.arctan2(b, a), np.asarray(z).dtype)


def log1p(z: np.ndarray) -> np.ndarray:
    """Real part log1p(m - 1) + 0.5 log1p((min/max)^2) of |a+1|, |b| (exact near 0, no overflow),
    min where that is NaN, -inf at z = -1; imaginary part atan2(b, a + 1)."""
    a, b = _parts(z)
    one = _c(1, a)
    a1 = a + one
    aa1, ab = np.abs(a1), np.abs(b)
    mx, mn = np.maximum(aa1, ab), np.minimum(aa1, ab)
    m1 = np.where(a1 > ab, a, mx - one)
    ratio = mn / mx
    r = _c(0.5, a) * np.log1p(ratio * ratio) + np.log1p(m1)
    r = np.where(mx == 0, -np.inf, np.where(np.isnan(r), mn, r))
    return _compose(r, np.arctan2(b, a1), np.asarray(z).dtype)


def _sin_cos(z: np.ndarray, op: str) -> np.ndarray:
    """sin(x+iy) = sin x cosh y + i cos x sinh y; cos(x+iy) = cos x cosh y - i sin x sinh y, with
    cosh/sinh from 0.5 e^y and 0.5 / e^y."""
    x, y = _parts(z)
    ey = np.exp(y)
    he, hne = _c(0.5, x) * ey, _c(0.5, x) / ey
    sinh, cosh = he - hne, he + hne
    sx, cx = np.sin(x), np.cos(x)
    if op == "sine":
        return _compose(sx * cosh, cx * sinh, np.asarray(z).dtype)
    return _compose(cx * cosh, -(sx * sinh), np.asarray(z).dtype)


def _tanh_parts(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """tanh(a+bi) = (e^2a - e^-2a + 2i sin 2b) / (e^2a + e^-2a + 2 cos 2b), through expm1 and
    4cos^2 b / 4 sin b cos b, the real part's limit copysign(1, a) where e^2a + e^-2a overflows,
    and XLA's corner cases for infinite/NaN parts."""
    zero, inf, four = _c(0, a), _c(np.inf, a), _c(4, a)
    two_a = a + a
    e2 = np.expm1(two_a)
    en2 = np.expm1(-two_a)
    real_num = e2 - en2
    cb, sb = np.cos(b), np.sin(b)
    imag_num = four * (cb * sb)
    sum_m2 = e2 + en2
    denom = sum_m2 + cb * cb * four
    real = np.where(sum_m2 == inf, np.copysign(_c(1, a), a), real_num / denom)
    imag = imag_num / denom
    a_inf = np.abs(a) == inf
    sin_nan = np.isnan(imag_num)
    real = np.where(sin_nan & ~a_inf, np.nan, real)
    imag = np.where((b == 0) | (a_inf & sin_nan), zero, imag)
    return real, imag


def tanh(z: np.ndarray) -> np.ndarray:
    a, b = _parts(z)
    re, im = _tanh_parts(a, b)
    return _compose(re, im, np.asarray(z).dtype)


def tan(z: np.ndarray) -> np.ndarray:
    """tan(x+yi) = -i tanh(-y + xi)."""
    x, y = _parts(z)
    re, im = _tanh_parts(-y, x)
    return _compose(im, -re, np.asarray(z).dtype)


def power(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(a+bi)^(c+di) = |x|^c e^(-d t) (cos q + i sin q), t = atan2(b, a), q = c t + d ln|x|, with
    XLA's cut-offs: 0^(c>=0, d=0) is 1 for c = 0 else 0; x^0 = 1; 1^y = 1; inf^(c>0) = inf and
    inf^(c<0) = 0 for real positive infinite bases."""
    dt = np.result_type(x, y)
    x, y = np.broadcast_arrays(np.asarray(x, dt), np.asarray(y, dt))
    a, b = _parts(x)
    c, d = _parts(y)
    zero, one, inf = _c(0, a), _c(1, a), _c(np.inf, a)
    r = abs_(x)
    t = np.arctan2(b, a)
    coeff = np.power(r, c) * np.exp(-d * t)
    q = c * t + d * np.log(r)
    re, im = coeff * np.cos(q), coeff * np.sin(q)
    cut0 = (r == 0) & (d == 0) & (zero <= c)
    re = np.where(cut0, np.where(c == 0, one, zero), re)
    im = np.where(cut0, zero, im)
    y0 = (c == 0) & (d == 0)
    x1 = (a == one) & (b == 0)
    re = np.where(y0 | x1, one, re)
    im = np.where(y0 | x1, zero, im)
    xinf = (a == inf) & (b == 0) & (d == 0)
    re = np.where(xinf & (c > 0), inf, np.where(xinf & (c < 0), zero, re))
    im = np.where(xinf & ((c > 0) | (c < 0)), zero, im)
    return _compose(re, im, dt)


def _sine(z: np.ndarray) -> np.ndarray:
    return _sin_cos(z, "sine")


def _cosine(z: np.ndarray) -> np.ndarray:
    return _sin_cos(z, "cosine")


#: Graph-op name -> XLA's complex function (arity from the op; abs returns the component type).
COMPLEX_FUNCTIONS: dict[str, Fn] = {
    "abs": abs_, "sign": sign, "sqrt": sqrt, "rsqrt": rsqrt, "exponential": exp, "exponential-minus-one": expm1,
    "log": log, "log-plus-one": log1p, "sine": _sine, "cosine": _cosine, "tan": tan, "tanh": tanh, "divide": divide,
    "power": power,
}

