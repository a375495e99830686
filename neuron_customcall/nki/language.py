"""``nki.language`` (nl): the high-level NKI API, traced into kernel IR.

Each function emits whole-tile instructions into the active trace and returns new tiles. Index
arithmetic on ``program_id``/``arange``/loop variables stays symbolic (``indexing.Idx``) and turns
into values (``iota``) only when it meets data. The implementation lives in ``nki/lang/``, one
module per kind of operation; this module is the namespace kernels use, and it installs the
``Tile`` operators (``a + b`` is ``nl.add(a, b)``, ``t[...] = v`` an assignment), as JAX installs
its Tracer's, so that ``tile.py`` imports nothing above it.
"""

from __future__ import annotations

from .tile import Tile
from .dtypes import (bfloat16, bfp16, bool_, float4_e2m1fn_x4, float8_e4m3, float8_e4m3fn,
                     float8_e4m3fn_x4, float8_e5m2, float8_e5m2_x4, float8_e8m0fnu, float16,
                     float32, fp32, int8, int16, int32, tfloat32, uint8, uint16, uint32)
from .indexing import arange, ds, mgrid
from .lang.operands import (  # noqa: F401, A004
    par_dim, sbuf, psum, hbm, private_hbm,
    shared_hbm)
from .lang.constants import (  # noqa: F401
    tile_size, MemoryRegion, is_hbm, is_on_chip, is_psum, is_sbuf, bypass, prelu, average,
    NKIObject, NkiTensor)
from .lang.elementwise import (  # noqa: F401, A004
    where, add, subtract, multiply, divide, power,
    maximum, minimum, mod, fmod, equal, not_equal,
    greater, greater_equal, less, less_equal, logical_and, logical_or,
    logical_xor, bitwise_and, bitwise_or, bitwise_xor, left_shift, right_shift,
    abs_max, abs_min, gelu_apprx_sigmoid, gelu_apprx_sigmoid_dx,
    abs, negative, sign, trunc, floor, ceil,
    exp, log, cos, sin, tan, tanh,
    arctan, sqrt, rsqrt, sigmoid, relu, gelu,
    gelu_dx, gelu_apprx_tanh, silu, silu_dx, erf, erf_dx,
    softplus, mish, square, reciprocal, logical_not, invert)
from .lang.spmd import (  # noqa: F401, A004
    program_id, num_programs, program_ndim, affine_range, sequential_range, static_range,
    nc, spmd_dim, no_reorder)
from .lang.control import dynamic_range, fori_loop, while_loop  # noqa: F401
from .lang.casts import static_cast, finfo  # noqa: F401
from .lang.debug import device_print  # noqa: F401
from .lang.rng import random_seed  # noqa: F401
from .lang.gather import gather_flattened  # noqa: F401
from .lang.loop_reduce import loop_reduce  # noqa: F401
from .lang.unsupported_ops import all_reduce, gemm_grid, gemm_stationary_grid  # noqa: F401
from .lang.memory import accumulate as _accumulate, assign as _assign
from .lang.tensor_methods import METHODS as _TENSOR_METHODS
from .lang.memory import (  # noqa: F401, A004
    ndarray, full, zeros, ones, zeros_like, empty_like,
    shared_identity_matrix, shared_constant, load, store, load_transpose2d, copy, broadcast_to,
    expand_dims, atomic_rmw, rand, dropout)
from .lang.reductions import (  # noqa: F401, A004
    sum, max, min, prod, all, mean,
    var, softmax, rms_norm)
from .lang.tensor_ops import (  # noqa: F401, A004
    transpose, matmul)

__all__ = [
    "bfloat16", "bool_", "float8_e4m3", "float8_e5m2", "float16", "float32",
    "int8", "int16", "int32", "tfloat32", "uint8", "uint16",
    "uint32", "arange", "ds", "mgrid", "par_dim", "tile_size",
    "sbuf", "psum", "hbm", "private_hbm", "shared_hbm", "where",
    "add", "subtract", "multiply", "divide", "power", "maximum",
    "minimum", "mod", "fmod", "equal", "not_equal", "greater",
    "greater_equal", "less", "less_equal", "logical_and", "logical_or", "logical_xor",
    "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "abs",
    "negative", "sign", "trunc", "floor", "ceil", "exp",
    "log", "cos", "sin", "tan", "tanh", "arctan",
    "sqrt", "rsqrt", "sigmoid", "relu", "gelu", "gelu_dx",
    "gelu_apprx_tanh", "silu", "silu_dx", "erf", "erf_dx", "softplus",
    "mish", "square", "reciprocal", "logical_not", "invert", "program_id",
    "num_programs", "program_ndim", "affine_range", "sequential_range", "static_range", "ndarray",
    "full", "zeros", "ones", "zeros_like", "empty_like", "shared_identity_matrix",
    "shared_constant",
    "load", "store", "load_transpose2d", "copy", "broadcast_to", "expand_dims",
    "atomic_rmw", "rand", "dropout", "sum", "max", "min", "prod", "all",
    "mean", "var", "softmax", "rms_norm", "transpose", "matmul",
    "float8_e4m3fn", "float8_e8m0fnu", "float8_e5m2_x4", "float8_e4m3fn_x4", "float4_e2m1fn_x4",
    "fp32", "bfp16", "MemoryRegion", "is_hbm", "is_on_chip", "is_psum", "is_sbuf", "bypass",
    "prelu", "average", "NKIObject", "NkiTensor", "abs_max", "abs_min", "gelu_apprx_sigmoid",
    "gelu_apprx_sigmoid_dx", "nc", "spmd_dim", "dynamic_range", "fori_loop", "while_loop",
    "no_reorder", "static_cast", "finfo", "device_print", "random_seed", "all_reduce",
    "gather_flattened", "loop_reduce", "gemm_grid", "gemm_stationary_grid",
]


# --- Tile operators ------------------------------------------------------------------------------

#: dunder -> (nl function, reversed operands)
_BINARY_OPERATORS = {
    "__add__": (add, False), "__radd__": (add, True),
    "__sub__": (subtract, False), "__rsub__": (subtract, True),
    "__mul__": (multiply, False), "__rmul__": (multiply, True),
    "__truediv__": (divide, False), "__rtruediv__": (divide, True),
    "__pow__": (power, False), "__rpow__": (power, True),
    "__mod__": (mod, False),
    "__and__": (bitwise_and, False), "__or__": (bitwise_or, False),
    "__xor__": (bitwise_xor, False),
    "__lshift__": (left_shift, False), "__rshift__": (right_shift, False),
    "__lt__": (less, False), "__le__": (less_equal, False),
    "__gt__": (greater, False), "__ge__": (greater_equal, False),
    "__eq__": (equal, False), "__ne__": (not_equal, False),
    "__matmul__": (matmul, False),
}
_UNARY_OPERATORS = {"__neg__": negative, "__abs__": abs, "__invert__": invert}
#: in-place operators: accumulate into the tile (PSUM accumulation in affine_range loops)
_INPLACE_OPERATORS = {"__iadd__": "add", "__isub__": "subtract", "__imul__": "multiply"}


def _binary_method(name: str, fn, reverse: bool):
    def method(self, other):
        return fn(other, self) if reverse else fn(self, other)
    method.__name__ = name
    return method


def _unary_method(name: str, fn):
    def method(self):
        return fn(self)
    method.__name__ = name
    return method


def _inplace_method(name: str, op: str):
    def method(self, other):
        _accumulate(self, other, op)
        return self
    method.__name__ = name
    return method


def _setitem(self, key, value) -> None:
    _assign(self[key], value)


def _astype(self, dtype):
    return copy(self, dtype=dtype)


def _install_tile_operators() -> None:
    for name, (fn, reverse) in _BINARY_OPERATORS.items():
        setattr(Tile, name, _binary_method(name, fn, reverse))
    for name, fn in _UNARY_OPERATORS.items():
        setattr(Tile, name, _unary_method(name, fn))
    for name, op in _INPLACE_OPERATORS.items():
        setattr(Tile, name, _inplace_method(name, op))
    Tile.__setitem__ = _setitem
    Tile.astype = _astype
    Tile.broadcast_to = broadcast_to
    Tile.expand_dims = expand_dims
    for name, member in _TENSOR_METHODS.items():
        if not hasattr(Tile, name):  # a Tile's own definition (tile.py) wins
            setattr(Tile, name, member)


_install_tile_operators()
