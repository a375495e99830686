"""Element-wise operations (VectorE ALU ops, ScalarE activations) and ``where``."""

from __future__ import annotations

import numpy as np

from emulator.kernel_exec import alu
from emulator.kernel_ir import affine_to_json

from .. import dtypes as nkd
from ..errors import NonAffineIndexError
from ..indexing import Idx, Pred
from ..tile import Tile
from ..tracer import current
from . import dynamic
from .operands import broadcast_shapes, is_scalar, operand, scalar_value

_COMPARISONS = {"equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
                "logical_and", "logical_or", "logical_xor"}

_IDX_OPS = {"add": lambda a, b: a + b, "subtract": lambda a, b: a - b,
            "multiply": lambda a, b: a * b, "less": lambda a, b: a < b,
            "less_equal": lambda a, b: a <= b, "greater": lambda a, b: a > b,
            "greater_equal": lambda a, b: a >= b, "equal": lambda a, b: a == b}


def binary_op(op: str, x, y, dtype=None, mask=None) -> "Tile | Idx | Pred | float":
    """``op(x, y)``: index algebra when both are index expressions, constant folding for two
    scalars, else ``tensor_tensor`` (two tiles) or ``tensor_scalar`` (a tile and a scalar)."""
    tr = current()
    if op == "add" and mask is None and dtype is None:
        dyn = dynamic.plus_offset(x, y)  # ``iy + offsets[0, k]``: an index or, as data, a tile
        if dyn is not None:
            return dyn
    if not isinstance(x, Tile) and not isinstance(y, Tile):
        if isinstance(x, (Idx, int)) and isinstance(y, (Idx, int)) and op in _IDX_OPS \
                and (isinstance(x, Idx) or isinstance(y, Idx)) and mask is None and dtype is None:
            try:
                return _IDX_OPS[op](x, y)
            except NonAffineIndexError:
                pass
        if is_scalar(x) and is_scalar(y):
            with np.errstate(all="ignore"):
                return alu.binary(op, np.float32(x) if isinstance(x, float) else x,
                                  np.float32(y) if isinstance(y, float) else y).item()
    typed = x if not isinstance(x, Tile) else y  # the scalar as given (np.float16 keeps its type)
    x, y = operand(x), operand(y)
    _refuse_packed(op, x, y)
    if op in _COMPARISONS:
        out_dtype = "bool"
    elif isinstance(x, Tile) and isinstance(y, Tile):
        out_dtype = nkd.promote(x.dtype_name, y.dtype_name)
    else:
        t = x if isinstance(x, Tile) else y
        out_dtype = nkd.promote_scalar(t.dtype_name, typed if isinstance(typed, np.generic)
                                       else (y if t is x else x))
    if op == "divide" and not nkd.is_float(out_dtype):
        out_dtype = "float32"  # true division of integers
    if dtype is not None:
        out_dtype = nkd.name_of(dtype)
    if isinstance(x, Tile) and isinstance(y, Tile):
        return tr.new("tensor_tensor", broadcast_shapes(tr, x.shape, y.shape), out_dtype, x, y,
                      mask=mask, op=op)
    t, s, rev = (x, y, False) if isinstance(x, Tile) else (y, x, True)
    return tr.new("tensor_scalar", t.shape, out_dtype, t, s, mask=mask, op0=op, reverse0=rev)


def _refuse_packed(api: str, *operands) -> None:
    """Packed tiles (``float8_e5m2_x4`` ...) hold four elements per stored word: an ALU would
    compute on the words, so NKI gives them only to data movement and the MX instructions."""
    for t in operands:
        if isinstance(t, Tile) and nkd.is_packed(t.dtype_name):
            raise current().error(
                "packed dtype", f"{api} on tile {t.name!r} of packed dtype {t.dtype_name}: only "
                "loads, stores, copies and the MX matmul instructions take packed tiles")


_FLOAT_RESULT = {"exp", "log", "cos", "sin", "tan", "tanh", "arctan", "sqrt", "rsqrt", "sigmoid",
                 "gelu", "gelu_dx", "gelu_apprx_tanh", "gelu_apprx_sigmoid",
                 "gelu_apprx_sigmoid_dx", "silu", "silu_dx", "erf", "erf_dx",
                 "softplus", "mish", "reciprocal"}


def unary_dtype(func: str, x_dtype: str, dtype=None) -> str:
    """The result dtype of activation ``func`` on a tile of ``x_dtype``: ``dtype`` if given,
    bool for ``logical_not``, float32 for transcendental functions of integers, else ``x_dtype``."""
    if dtype is not None:
        return nkd.name_of(dtype)
    if func == "logical_not":
        return "bool"
    if func in _FLOAT_RESULT and not nkd.is_float(x_dtype):
        return "float32"
    return x_dtype


def unary_op(func: str, x, dtype=None, mask=None, scale=1.0, bias=None) -> Tile:
    """``func(x * scale + bias)`` as one ScalarE ``activation``; transcendental functions of
    integer tiles give float32."""
    tr = current()
    x = operand(x)
    if not isinstance(x, Tile):
        with np.errstate(all="ignore"):
            return alu.activation(func, np.float32(x)).item()
    _refuse_packed(func, x)
    out_dtype = unary_dtype(func, x.dtype_name, dtype)
    srcs = [x, 0.0 if bias is None else operand(bias)]
    s = operand(scale)
    if isinstance(s, Tile):
        srcs.append(s)
        s = 1.0
    return tr.new("activation", x.shape, out_dtype, *srcs, mask=mask, func=func, scale=float(s))


def _binary(name: str):
    def fn(x, y, dtype=None, mask=None):
        return binary_op(name, x, y, dtype, mask)
    fn.__name__ = name
    fn.__qualname__ = name
    fn.__doc__ = f"Element-wise ``{name}(x, y)`` with NumPy broadcasting (VectorE)."
    fn._nki_alu = name
    return fn


def _unary(name: str):
    def fn(x, dtype=None, mask=None):
        return unary_op(name, x, dtype, mask)
    fn.__name__ = name
    fn.__qualname__ = name
    fn.__doc__ = f"Element-wise ``{name}(x)`` (ScalarE activation)."
    fn._nki_act = name
    return fn


add = _binary("add")
subtract = _binary("subtract")
multiply = _binary("multiply")
divide = _binary("divide")
power = _binary("power")
maximum = _binary("maximum")
minimum = _binary("minimum")
mod = _binary("mod")
fmod = _binary("fmod")
equal = _binary("equal")
not_equal = _binary("not_equal")
greater = _binary("greater")
greater_equal = _binary("greater_equal")
less = _binary("less")
less_equal = _binary("less_equal")
logical_and = _binary("logical_and")
logical_or = _binary("logical_or")
logical_xor = _binary("logical_xor")
bitwise_and = _binary("bitwise_and")
bitwise_or = _binary("bitwise_or")
bitwise_xor = _binary("bitwise_xor")
left_shift = _binary("left_shift")
right_shift = _binary("right_shift")
abs_max = _binary("abs_max")
abs_min = _binary("abs_min")

abs = _unary("abs")  # noqa: A001  (NKI's name)
negative = _unary("negative")
sign = _unary("sign")
trunc = _unary("trunc")
floor = _unary("floor")
ceil = _unary("ceil")
exp = _unary("exp")
log = _unary("log")
cos = _unary("cos")
sin = _unary("sin")
tan = _unary("tan")
tanh = _unary("tanh")
arctan = _unary("arctan")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
sigmoid = _unary("sigmoid")
relu = _unary("relu")
gelu = _unary("gelu")
gelu_dx = _unary("gelu_dx")
gelu_apprx_tanh = _unary("gelu_apprx_tanh")
gelu_apprx_sigmoid = _unary("gelu_apprx_sigmoid")
gelu_apprx_sigmoid_dx = _unary("gelu_apprx_sigmoid_dx")
silu = _unary("silu")
silu_dx = _unary("silu_dx")
erf = _unary("erf")
erf_dx = _unary("erf_dx")
softplus = _unary("softplus")
mish = _unary("mish")
square = _unary("square")
reciprocal = _unary("reciprocal")
logical_not = _unary("logical_not")
invert = _unary("invert")


def where(condition, x, y, dtype=None, *, mask=None) -> Tile:
    """``x`` where ``condition`` else ``y``. An affine condition with a scalar ``y`` becomes one
    ``affine_select`` (no index tiles materialised), e.g. a causal mask."""
    tr = current()
    if isinstance(condition, Pred) and isinstance(x, Tile) and is_scalar(y):
        affs = condition.to_affines(len(x.shape))
        return tr.new("affine_select", x.shape,
                      nkd.name_of(dtype) if dtype is not None else x.dtype_name, x,
                      scalar_value(y), mask=mask, pred=[affine_to_json(a) for a in affs])
    c, a, b = operand(condition), operand(x), operand(y)
    tiles = [t for t in (c, a, b) if isinstance(t, Tile)]
    shape: tuple[int, ...] = ()
    for t in tiles:
        shape = broadcast_shapes(tr, shape, t.shape)
    if isinstance(a, Tile) and isinstance(b, Tile):
        out_dtype = nkd.promote(a.dtype_name, b.dtype_name)
    else:
        t = a if isinstance(a, Tile) else b
        out_dtype = t.dtype_name if isinstance(t, Tile) else "float32"
    if dtype is not None:
        out_dtype = nkd.name_of(dtype)
    return tr.new("select", shape, out_dtype, c, a, b, mask=mask)
