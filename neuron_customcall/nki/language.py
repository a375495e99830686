"""``nki.language`` (nl): the high-level NKI API, traced into kernel IR.

Each function emits whole-tile instructions into the active trace and returns new tiles. Index
arithmetic on ``program_id``/``arange``/loop variables stays symbolic (``indexing.Idx``) and turns
into values (``iota``) only when it meets data. The implementation lives in ``nki/lang/``, one
module per kind of operation; this module is the namespace kernels use.
"""

from __future__ import annotations

from .dtypes import (bfloat16, bool_, float8_e4m3, float8_e5m2, float16, float32, int8, int16,
                     int32, tfloat32, uint8, uint16, uint32)
from .indexing import arange, ds, mgrid
from .lang.operands import (  # noqa: F401, A004
    par_dim, tile_size, sbuf, psum, hbm, private_hbm,
    shared_hbm)
from .lang.elementwise import (  # noqa: F401, A004
    where, add, subtract, multiply, divide, power,
    maximum, minimum, mod, fmod, equal, not_equal,
    greater, greater_equal, less, less_equal, logical_and, logical_or,
    logical_xor, bitwise_and, bitwise_or, bitwise_xor, left_shift, right_shift,
    abs, negative, sign, trunc, floor, ceil,
    exp, log, cos, sin, tan, tanh,
    arctan, sqrt, rsqrt, sigmoid, relu, gelu,
    gelu_dx, gelu_apprx_tanh, silu, silu_dx, erf, erf_dx,
    softplus, mish, square, reciprocal, logical_not, invert)
from .lang.spmd import (  # noqa: F401, A004
    program_id, num_programs, program_ndim, affine_range, sequential_range, static_range)
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
]
