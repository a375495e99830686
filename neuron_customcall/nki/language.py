"""``nki.language`` (nl): the high-level NKI API, traced into kernel IR.

Each function emits whole-tile instructions into the active trace and returns new tiles. Index
arithmetic on ``program_id``/``arange``/loop variables stays symbolic (``indexing.Idx``) and turns
into values (``iota``) only when it meets data.
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from emulator import machine
from emulator.kernel_ir import Const, affine_to_json

from . import dtypes as nkd
from .dtypes import (bfloat16, bool_, float8_e4m3, float8_e5m2, float16, float32, int8, int16,
                     int32, tfloat32, uint8, uint16, uint32)
from .errors import NonAffineIndexError
from .indexing import Idx, Pred, arange, ds, mgrid, symbol
from .tile import Tile
from .tracer import current, current_or_none

# --- buffers, par_dim, tile sizes ------------------------------------------------------------------

sbuf = machine.SBUF
psum = machine.PSUM
hbm = machine.HBM
private_hbm = machine.HBM
shared_hbm = machine.SHARED_HBM


class par_dim(int):  # noqa: N801  (NKI's name)
    """Marks the partition dimension in an allocation shape: ``(nl.par_dim(128), 512)``."""


class tile_size:  # noqa: N801
    pmax = machine.NUM_PARTITIONS
    psum_fmax = machine.PSUM_FMAX
    gemm_stationary_fmax = machine.GEMM_STATIONARY_FMAX
    gemm_moving_fmax = machine.GEMM_MOVING_FMAX


# --- helpers ---------------------------------------------------------------------------------------

def _buffer(buffer) -> str:
    name = getattr(buffer, "name", buffer) if buffer is not None else sbuf
    if name not in machine.MEMORY_SPACES:
        raise current().error("unknown buffer", f"{buffer!r} is not sbuf, psum, hbm or shared_hbm")
    return name


def _shape(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


def _new(shape, dtype: str, memory: str = sbuf) -> Tile:
    tr = current()
    return Tile(tr, tr.temp(_shape(shape), dtype, memory))


def _is_scalar(x) -> bool:
    return isinstance(x, (int, float, bool, np.number, np.bool_))


def _scalar(x):
    return x.item() if hasattr(x, "item") else x


def _iota_tile(idx: Idx, dtype: str = "int32") -> Tile:
    """An index expression used as data: materialise it with ``iota``."""
    shape = idx.shape or (1,)
    out = _new(shape, dtype)
    current().emit("iota", out.access(), (), {"expr": affine_to_json(idx.to_affine(len(shape)))})
    return out


def _pred_tile(pred: Pred) -> Tile:
    """A mask used as data: a bool tile, true where every expression is >= 0."""
    result = None
    for e in pred.exprs:
        t = _binary_op("greater_equal", _iota_tile(e), 0)
        result = t if result is None else _binary_op("logical_and", result, t)
    return result


def _operand(x):
    """Tile, Python scalar, or a materialised index expression / mask."""
    if isinstance(x, Tile):
        return x
    if isinstance(x, Idx):
        return _iota_tile(x)
    if isinstance(x, Pred):
        return _pred_tile(x)
    if _is_scalar(x):
        return _scalar(x)
    if isinstance(x, np.ndarray) and x.ndim == 0:
        return x.item()
    raise current().error("invalid operand", f"{type(x).__name__} is not a tile or a scalar")


def _broadcast_shapes(tr, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        raise tr.error("shape mismatch", f"tiles {list(a)} and {list(b)} do not broadcast") from None


def _op_name(op) -> str:
    """ALU operator name of ``nl.add``, ``np.add``, or "add"."""
    from emulator.kernel_ir import ops
    name = getattr(op, "_nki_alu", None) or getattr(op, "__name__", op)
    name = {"true_divide": "divide", "max": "maximum", "min": "minimum"}.get(name, name)
    if name not in ops.ALU_OPS:
        raise current().error("unknown operator", f"{op!r} is not an ALU operator")
    return name


def _act_name(op) -> str:
    from emulator.kernel_ir import ops
    name = getattr(op, "_nki_act", None) or getattr(op, "__name__", op)
    if name not in ops.ACTIVATIONS:
        raise current().error("unknown activation", f"{op!r} is not an activation function")
    return name


_COMPARISONS = {"equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
                "logical_and", "logical_or", "logical_xor"}

_IDX_OPS = {"add": lambda a, b: a + b, "subtract": lambda a, b: a - b,
            "multiply": lambda a, b: a * b, "less": lambda a, b: a < b,
            "less_equal": lambda a, b: a <= b, "greater": lambda a, b: a > b,
            "greater_equal": lambda a, b: a >= b, "equal": lambda a, b: a == b}


def _binary_op(op: str, x, y, dtype=None, mask=None) -> "Tile | Idx | Pred | float":
    tr = current()
    if not isinstance(x, Tile) and not isinstance(y, Tile):
        if isinstance(x, (Idx, int)) and isinstance(y, (Idx, int)) and op in _IDX_OPS \
                and (isinstance(x, Idx) or isinstance(y, Idx)) and mask is None and dtype is None:
            try:
                return _IDX_OPS[op](x, y)
            except NonAffineIndexError:
                pass
        if _is_scalar(x) and _is_scalar(y):
            from emulator.kernel_exec import alu
            return alu.binary(op, np.float32(x) if isinstance(x, float) else x,
                              np.float32(y) if isinstance(y, float) else y).item()
    x, y = _operand(x), _operand(y)
    if op in _COMPARISONS:
        out_dtype = "bool"
    elif isinstance(x, Tile) and isinstance(y, Tile):
        out_dtype = nkd.promote(x.dtype_name, y.dtype_name)
    else:
        t, s = (x, y) if isinstance(x, Tile) else (y, x)
        out_dtype = nkd.promote_scalar(t.dtype_name, s)
        if op == "divide" and not nkd.is_float(out_dtype):
            out_dtype = "float32"
    if op == "divide" and isinstance(x, Tile) and isinstance(y, Tile) \
            and not nkd.is_float(out_dtype):
        out_dtype = "float32"
    if dtype is not None:
        out_dtype = nkd.name_of(dtype)
    if isinstance(x, Tile) and isinstance(y, Tile):
        shape = _broadcast_shapes(tr, x.shape, y.shape)
        out = _new(shape, out_dtype)
        tr.emit("tensor_tensor", out.access(), (x.access(), y.access()), {"op": op}, mask)
    else:
        t, s, rev = (x, y, False) if isinstance(x, Tile) else (y, x, True)
        out = _new(t.shape, out_dtype)
        tr.emit("tensor_scalar", out.access(), (t.access(), Const(s)),
                {"op0": op, "reverse0": rev}, mask)
    return out


_FLOAT_RESULT = {"exp", "log", "cos", "sin", "tan", "tanh", "arctan", "sqrt", "rsqrt", "sigmoid",
                 "gelu", "gelu_dx", "gelu_apprx_tanh", "silu", "silu_dx", "erf", "erf_dx",
                 "softplus", "mish", "reciprocal"}


def _unary_op(func: str, x, dtype=None, mask=None, scale=1.0, bias=None) -> Tile:
    tr = current()
    x = _operand(x)
    if not isinstance(x, Tile):
        from emulator.kernel_exec import alu
        return alu.activation(func, np.float32(x)).item()
    if dtype is not None:
        out_dtype = nkd.name_of(dtype)
    elif func == "logical_not":
        out_dtype = "bool"
    elif func in _FLOAT_RESULT and not nkd.is_float(x.dtype_name):
        out_dtype = "float32"
    else:
        out_dtype = x.dtype_name
    out = _new(x.shape, out_dtype)
    srcs = [x.access(), Const(0.0)]
    attrs = {"func": func, "scale": 1.0}
    if bias is not None:
        b = _operand(bias)
        srcs[1] = b.access() if isinstance(b, Tile) else Const(b)
    s = _operand(scale)
    if isinstance(s, Tile):
        srcs.append(s.access())
    else:
        attrs["scale"] = float(s)
    tr.emit("activation", out.access(), tuple(srcs), attrs, mask)
    return out


def _binary(name: str):
    def fn(x, y, *, dtype=None, mask=None):
        return _binary_op(name, x, y, dtype, mask)
    fn.__name__ = name
    fn.__qualname__ = name
    fn.__doc__ = f"Element-wise ``{name}(x, y)`` with NumPy broadcasting (VectorE)."
    fn._nki_alu = name
    return fn


def _unary(name: str):
    def fn(x, *, dtype=None, mask=None):
        return _unary_op(name, x, dtype, mask)
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


def where(condition, x, y, *, dtype=None, mask=None) -> Tile:
    """``x`` where ``condition`` else ``y``. An affine condition with a scalar ``y`` becomes one
    ``affine_select`` (no index tiles materialised), e.g. a causal mask."""
    tr = current()
    if isinstance(condition, Pred) and isinstance(x, Tile) and _is_scalar(y):
        out = _new(x.shape, nkd.name_of(dtype) if dtype is not None else x.dtype_name)
        affs = condition.to_affines(len(x.shape))
        tr.emit("affine_select", out.access(), (x.access(), Const(_scalar(y))),
                {"pred": [affine_to_json(a) for a in affs]}, mask)
        return out
    c, a, b = _operand(condition), _operand(x), _operand(y)
    tiles = [t for t in (c, a, b) if isinstance(t, Tile)]
    shape: tuple[int, ...] = ()
    for t in tiles:
        shape = _broadcast_shapes(tr, shape, t.shape)
    if isinstance(a, Tile) and isinstance(b, Tile):
        out_dtype = nkd.promote(a.dtype_name, b.dtype_name)
    else:
        t = a if isinstance(a, Tile) else b
        out_dtype = t.dtype_name if isinstance(t, Tile) else "float32"
    if dtype is not None:
        out_dtype = nkd.name_of(dtype)
    ops_ = tuple(v.access() if isinstance(v, Tile) else Const(v) for v in (c, a, b))
    out = _new(shape, out_dtype)
    tr.emit("select", out.access(), ops_, {}, mask)
    return out


# --- SPMD ------------------------------------------------------------------------------------------

def program_id(axis: int) -> Idx:
    """This instance's index along grid ``axis`` (symbolic: the grid runs vectorised)."""
    tr = current()
    if not 0 <= int(axis) < builtins.max(1, len(tr.grid)):
        raise tr.error("invalid program axis", f"program_id({axis}) with a grid of {list(tr.grid)}")
    return symbol(f"p{int(axis)}")


def num_programs(axes=None):
    tr = current()
    if axes is None:
        return math.prod(tr.grid)
    if isinstance(axes, (tuple, list)):
        return tuple(tr.grid[a] for a in axes)
    return tr.grid[axes]


def program_ndim() -> int:
    return len(current().grid)


# --- loops -----------------------------------------------------------------------------------------

class _Range:
    """``range(start, stop, step)`` traced once as an IR loop (outside a kernel: a plain range)."""

    def __init__(self, args: tuple, kind: str):
        self.range = range(*(int(a) for a in args))
        self.kind = kind

    def __iter__(self):
        tr = current_or_none()
        if tr is None:
            return iter(self.range)
        r = self.range
        return tr.loop(len(r), self.kind, r.start, r.step)


def affine_range(*args) -> _Range:
    """Independent iterations (accumulation with ``+=`` allowed): traced once, run vectorised."""
    return _Range(args, "affine")


def sequential_range(*args) -> _Range:
    """Iterations with loop-carried dependencies: traced once, run one after another."""
    return _Range(args, "sequential")


def static_range(*args) -> range:
    """Fully unrolled at trace time (a plain Python ``range``)."""
    return range(*args)


# --- creation --------------------------------------------------------------------------------------

def ndarray(shape, dtype, *, buffer=None, name: str = "") -> Tile:
    """A new tensor; on chip (default SBUF) its contents start as NaN, as on the SDK simulator."""
    tr = current()
    memory = _buffer(buffer)
    decl = tr.declare(_shape(shape), nkd.name_of(dtype), memory, name=name)
    t = Tile(tr, decl)
    if memory in machine.ON_CHIP:
        tr.emit("alloc", t.access())
    return t


def full(shape, fill_value, dtype, *, buffer=None, name: str = "") -> Tile:
    t = ndarray(shape, dtype, buffer=buffer, name=name)
    current().emit("memset", t.access(), (Const(_scalar(fill_value)),))
    return t


def zeros(shape, dtype, *, buffer=None, name: str = "") -> Tile:
    return full(shape, 0, dtype, buffer=buffer, name=name)


def ones(shape, dtype, *, buffer=None, name: str = "") -> Tile:
    return full(shape, 1, dtype, buffer=buffer, name=name)


def zeros_like(a: Tile, dtype=None, *, buffer=None, name: str = "") -> Tile:
    return zeros(a.shape, dtype if dtype is not None else a.dtype_name,
                 buffer=buffer if buffer is not None else sbuf, name=name)


def empty_like(a: Tile, dtype=None, *, buffer=None, name: str = "") -> Tile:
    return ndarray(a.shape, dtype if dtype is not None else a.dtype_name,
                   buffer=buffer if buffer is not None else sbuf, name=name)


def shared_identity_matrix(n: int, dtype=float32) -> Tile:
    """An n x n identity tile (iota of ``i - j`` compared with 0)."""
    diff = arange(n)[:, None] - arange(n)[None, :]
    return where(diff == 0, ones((n, n), dtype), 0)


# --- memory ----------------------------------------------------------------------------------------

def load(src: Tile, *, mask=None, dtype=None) -> Tile:
    """HBM -> SBUF. Masked-out elements are neither read nor written (they stay NaN)."""
    tr = current()
    out = _new(src.shape, nkd.name_of(dtype) if dtype is not None else src.dtype_name)
    tr.emit("load", out.access(), (src.access(),), {}, mask)
    return out


def store(dst: Tile, value, *, mask=None) -> None:
    """SBUF/PSUM -> HBM."""
    v = _operand(value)
    src = v.access() if isinstance(v, Tile) else Const(v)
    current().emit("store", dst.access(), (src,), {}, mask)


def load_transpose2d(src: Tile, *, mask=None, dtype=None) -> Tile:
    return transpose(load(src, mask=mask, dtype=dtype))


def copy(x, dtype=None, *, mask=None) -> Tile:
    """On-chip copy, converting to ``dtype``."""
    x = _operand(x)
    tr = current()
    out = _new(x.shape, nkd.name_of(dtype) if dtype is not None else x.dtype_name)
    tr.emit("tensor_copy", out.access(), (x.access(),), {}, mask)
    return out


copy._nki_act = "copy"


def broadcast_to(x, shape) -> Tile:
    x = _operand(x)
    shape = _shape(shape)
    tr = current()
    _broadcast_shapes(tr, x.shape, shape)
    out = _new(shape, x.dtype_name)
    tr.emit("tensor_copy", out.access(), (x.access(),))
    return out


def expand_dims(x: Tile, axis: int) -> Tile:
    """A view with a new size-1 axis (no data movement)."""
    from emulator.kernel_ir import Affine
    rank = x.ndim + 1
    axis = axis % rank
    shape = x.shape[:axis] + (1,) + x.shape[axis:]
    ren = {f"t{j}": f"t{j + 1 if j >= axis else j}" for j in range(x.ndim)}
    index = tuple(Affine.make(a.const, {ren.get(s, s): c for s, c in a.terms}) for a in x.index)
    return Tile(x.trace, x.decl, shape, index)


def atomic_rmw(dst: Tile, value, op, *, mask=None) -> None:
    """``dst = op(dst, value)`` in HBM."""
    v = _operand(value)
    current().emit("store", dst.access(), (v.access() if isinstance(v, Tile) else Const(v),), {},
                   mask, acc=_op_name(op))


def _assign(view: Tile, value) -> None:
    """``tile[...] = value``: the instruction depends on where the value and the view live."""
    tr = current()
    if isinstance(value, Idx):
        tr.emit("iota", view.access(), (), {"expr": affine_to_json(value.to_affine(view.ndim))})
        return
    v = _operand(value)
    if not isinstance(v, Tile):
        op = "store" if not view.on_chip else "memset"
        tr.emit(op, view.access(), (Const(v),))
        return
    if not view.on_chip:
        tr.emit("store", view.access(), (v.access(),))
    elif not v.on_chip:
        tr.emit("load", view.access(), (v.access(),))
    else:
        tr.emit("tensor_copy", view.access(), (v.access(),))


def _accumulate(dst: Tile, value, op: str) -> None:
    """``dst op= value`` in place (PSUM accumulation in ``affine_range`` loops)."""
    tr = current()
    v = _operand(value)
    if not dst.on_chip:
        raise tr.error("in-place update of HBM", f"{dst.name} {op}= ...: use nl.store / atomic_rmw")
    src = v.access() if isinstance(v, Tile) else Const(v)
    tr.emit("tensor_copy", dst.access(), (src,), {}, None, acc=op)


# --- reductions ------------------------------------------------------------------------------------

def _axes(axis, rank: int) -> tuple[int, ...]:
    if axis is None:
        raise current().error("reduction axes", "reductions need axis= (free axes only)")
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    return tuple(sorted(int(a) % rank for a in axes))


def _reduce(op: str, x, axis, dtype=None, mask=None, keepdims=False, negate=False) -> Tile:
    tr = current()
    x = _operand(x)
    axes = _axes(axis, x.ndim)
    shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape) if keepdims or i not in axes)
    out_dtype = nkd.name_of(dtype) if dtype is not None else (
        "bool" if op in ("logical_and", "logical_or") else x.dtype_name)
    out = _new(shape, out_dtype)
    tr.emit("tensor_reduce", out.access(), (x.access(),),
            {"op": op, "axes": list(axes), "keepdims": bool(keepdims), "negate": bool(negate)},
            mask)
    return out


def sum(x, axis, *, dtype=None, mask=None, keepdims=False) -> Tile:  # noqa: A001
    return _reduce("add", x, axis, dtype, mask, keepdims)


def max(x, axis, *, dtype=None, mask=None, keepdims=False) -> Tile:  # noqa: A001
    return _reduce("maximum", x, axis, dtype, mask, keepdims)


def min(x, axis, *, dtype=None, mask=None, keepdims=False) -> Tile:  # noqa: A001
    return _reduce("minimum", x, axis, dtype, mask, keepdims)


def prod(x, axis, *, dtype=None, mask=None, keepdims=False) -> Tile:
    return _reduce("multiply", x, axis, dtype, mask, keepdims)


def all(x, axis, *, dtype=None, mask=None, keepdims=False) -> Tile:  # noqa: A001
    return _reduce("logical_and", x, axis, dtype, mask, keepdims)


def mean(x, axis, *, dtype=None, mask=None, keepdims=False) -> Tile:
    x = _operand(x)
    axes = _axes(axis, x.ndim)
    n = math.prod(x.shape[a] for a in axes)
    fdt = dtype if dtype is not None else (x.dtype_name if nkd.is_float(x.dtype_name)
                                           else "float32")
    s = _reduce("add", x, axes, "float32", mask, keepdims)
    return _binary_op("multiply", s, 1.0 / n, fdt, mask)


def var(x, axis, *, dtype=None, mask=None, keepdims=False) -> Tile:
    x = _operand(x)
    m = mean(x, axis, dtype="float32", keepdims=True)
    d = _binary_op("subtract", x, m, "float32")
    return mean(square(d), axis, dtype=dtype, mask=mask, keepdims=keepdims)


def softmax(x, axis, *, dtype=None, mask=None) -> Tile:
    """``exp(x - max) / sum(exp(x - max))`` along free ``axis``."""
    x = _operand(x)
    m = max(x, axis, keepdims=True)
    e = exp(_binary_op("subtract", x, m, "float32"))
    s = sum(e, axis, keepdims=True)
    return _binary_op("divide", e, s, dtype if dtype is not None else x.dtype_name, mask)


def rms_norm(x, w, axis, n, epsilon=1e-6, *, dtype=None, mask=None) -> Tile:
    """``x * rsqrt(sum(x^2, axis) / n + epsilon) * w``."""
    x = _operand(x)
    ss = sum(square(x, dtype="float32"), axis, keepdims=True)
    r = _unary_op("rsqrt", ss, scale=1.0 / n, bias=float(epsilon))
    y = _binary_op("multiply", x, r, "float32")
    return _binary_op("multiply", y, w, dtype if dtype is not None else x.dtype_name, mask)


# --- matmul and transpose --------------------------------------------------------------------------

def transpose(x, *, dtype=None, mask=None) -> Tile:
    """Swap the partition and free axes of a 2-D tile (TensorE transpose), result in SBUF."""
    x = _operand(x)
    if x.ndim != 2:
        raise current().error("transpose shape", f"transpose needs a 2-D tile, got {list(x.shape)}")
    out = _new((x.shape[1], x.shape[0]),
               nkd.name_of(dtype) if dtype is not None else x.dtype_name)
    current().emit("transpose", out.access(), (x.access(),), {}, mask)
    return out


def matmul(x, y, *, transpose_x: bool = False, mask=None) -> Tile:
    """``x @ y`` (or ``x.T @ y`` with ``transpose_x``): ``nc_matmul(transpose(x), y)``, fp32 in
    PSUM. x is [M<=128, K<=128] (or [K, M] transposed), y is [K<=128, N<=512]."""
    from . import isa
    x, y = _operand(x), _operand(y)
    stationary = x if transpose_x else transpose(x)
    return isa.nc_matmul(stationary, y, mask=mask)


__all__ = [n for n in dir() if not n.startswith("_") and n not in (
    "annotations", "builtins", "math", "np", "machine", "Const", "affine_to_json", "nkd", "NonAffineIndexError",
    "current", "current_or_none", "symbol", "Tile", "Pred")]
_ = (bfloat16, bool_, float8_e4m3, float8_e5m2, float16, float32, int8, int16, int32, tfloat32,
     uint8, uint16, uint32, arange, ds, mgrid)
