"""NumPy implementations of the IR's ALU operators and activation functions.

Engines compute in fp32 (ScalarE and VectorE convert on the way in and out), so float operands are
widened to float32 before an operation and the result is converted to the destination dtype when
it is written. Floating-point exceptions are not errors on the engines: callers run these under
``numpy.errstate(all="ignore")`` (the runner does, for a whole kernel).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from emulator import dtypes as records


def compute_dtype(*arrays: np.ndarray) -> np.dtype:
    """float32 if any operand is floating-point, else NumPy's promotion of the integer operands."""
    kinds = [np.asarray(a).dtype for a in arrays]
    if any(_is_float(k) for k in kinds):
        return np.dtype(np.float32)
    return np.result_type(*kinds)


def _is_float(dt: np.dtype) -> bool:
    return dt.kind == "f" or dt in _ML_FLOATS


#: The NKI floats stored as ml_dtypes types (bfloat16, fp8), from the dtype record.
_ML_FLOATS = {r.numpy for r in records.BY_NKI.values() if r.kind == records.FLOAT and r.ml_dtype}


def widen(a: np.ndarray) -> np.ndarray:
    """Engine-side view of an operand: floats as float32 (no copy when already float32)."""
    if type(a) is np.ndarray and a.dtype is _F32:  # the common case, decided without calls
        return a
    a = np.asarray(a)
    if _is_float(a.dtype) and a.dtype != np.float32:
        return a.astype(np.float32)
    return a


_F32 = np.dtype(np.float32)


def _rsqrt(x):
    return 1.0 / np.sqrt(x)


def _sigmoid(x):
    return 0.5 * (np.tanh(0.5 * x) + 1.0)


def _erf(x):
    """erf in float32 precision (Abramowitz & Stegun 7.1.26 refined: max error ~1.2e-7)."""
    x = np.asarray(x, dtype=np.float32)
    s = np.sign(x)
    a = np.abs(x).astype(np.float64)
    t = 1.0 / (1.0 + 0.5 * a)
    # Numerical Recipes erfc approximation (fractional error < 1.2e-7).
    y = t * np.exp(-a * a - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
            -0.82215223 + t * 0.17087277)))))))))
    return (s * (1.0 - y)).astype(np.float32)


def _erf_dx(x):
    return (2.0 / np.sqrt(np.pi)) * np.exp(-x * x)


def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x / np.sqrt(2.0)))


def _gelu_dx(x):
    cdf = 0.5 * (1.0 + _erf(x / np.sqrt(2.0)))
    pdf = np.exp(-0.5 * x * x) / np.sqrt(2.0 * np.pi)
    return cdf + x * pdf


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


#: The sigmoid approximation of GELU: x * sigmoid(1.702 x) (Hendrycks & Gimpel's constant).
_GELU_SIGMOID_K = 1.702


def _gelu_sigmoid(x):
    return x * _sigmoid(_GELU_SIGMOID_K * x)


def _gelu_sigmoid_dx(x):
    s = _sigmoid(_GELU_SIGMOID_K * x)
    return s + _GELU_SIGMOID_K * x * s * (1.0 - s)


def _into(result: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """``result``, written into ``out`` when given (the ufunc ``out=`` protocol)."""
    if out is None:
        return result
    out[...] = result
    return out


def _abs_max(a, b, out=None):
    """The operand of larger magnitude, keeping its sign; ``b`` on a tie (NKI's abs_max)."""
    return _into(np.where(np.abs(a) > np.abs(b), a, b), out)


def _abs_min(a, b, out=None):
    """The operand of smaller magnitude, keeping its sign; ``b`` on a tie (NKI's abs_min)."""
    return _into(np.where(np.abs(a) < np.abs(b), a, b), out)


def _silu_dx(x):
    s = _sigmoid(x)
    return s * (1.0 + x * (1.0 - s))


def _softplus(x):
    return np.logaddexp(0.0, x)


ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "copy": lambda x: x,
    "abs": np.abs,
    "negative": np.negative,
    "sign": np.sign,
    "trunc": np.trunc,
    "floor": np.floor,
    "ceil": np.ceil,
    "exp": np.exp,
    "log": np.log,
    "cos": np.cos,
    "sin": np.sin,
    "tan": np.tan,
    "tanh": np.tanh,
    "arctan": np.arctan,
    "sqrt": np.sqrt,
    "rsqrt": _rsqrt,
    "sigmoid": _sigmoid,
    "relu": lambda x: np.maximum(x, 0),
    "gelu": _gelu,
    "gelu_dx": _gelu_dx,
    "gelu_apprx_tanh": _gelu_tanh,
    "gelu_apprx_sigmoid": _gelu_sigmoid,
    "gelu_apprx_sigmoid_dx": _gelu_sigmoid_dx,
    "silu": lambda x: x * _sigmoid(x),
    "silu_dx": _silu_dx,
    "erf": _erf,
    "erf_dx": _erf_dx,
    "softplus": _softplus,
    "mish": lambda x: x * np.tanh(_softplus(x)),
    "square": np.square,
    "reciprocal": np.reciprocal,
    "logical_not": np.logical_not,
    "invert": np.invert,
}

ALU: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "power": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "mod": np.mod,
    "fmod": np.fmod,
    "equal": np.equal,
    "not_equal": np.not_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    "left_shift": np.left_shift,
    "right_shift": np.right_shift,
    "abs_max": _abs_max,
    "abs_min": _abs_min,
}


def reduce(op: str, x: np.ndarray, axis, keepdims: bool = False) -> np.ndarray:
    """Reduce with an associative ALU operator (``ops.REDUCE_OPS``)."""
    return ALU[op].reduce(x, axis=axis, keepdims=keepdims)


def binary(op: str, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``op(a, b)`` on engine-width operands; ``out`` (float32) receives the result when the
    operands are floats and the result is not boolean."""
    a, b = widen(a), widen(b)
    if out is not None and op not in BOOL_OPS and a.dtype == b.dtype == np.float32:
        return ALU[op](a, b, out=out)
    return ALU[op](a, b)


#: Operators whose result is boolean (never computed into a float ``out=``).
BOOL_OPS = frozenset({"equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
                       "logical_and", "logical_or", "logical_xor"})


def activation(func: str, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``func(x)``; ``out`` (float32) receives the result when ``func`` is a NumPy ufunc."""
    fn = ACTIVATIONS[func]
    x = widen(x)
    if out is not None and isinstance(fn, np.ufunc) and x.dtype == np.float32:
        return fn(x, out=out)
    return fn(x)
