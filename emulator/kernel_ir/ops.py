"""The vocabulary of the kernel IR: instruction names, ALU operators and activation functions.

Only names live here (the IR must stay NumPy-free to serialise); ``emulator.kernel_exec`` maps each
name to its NumPy implementation, and a test checks that every name has one.
"""

from __future__ import annotations

#: Instruction ops, each with a handler in emulator/kernel_exec/handlers/.
INSTRUCTIONS = frozenset({
    "alloc",              # start the lifetime of a tensor (NaN fill on chip)
    "load",               # HBM -> SBUF (DMA)
    "store",              # SBUF/PSUM -> HBM (DMA)
    "tensor_copy",        # on-chip copy with dtype conversion / broadcast
    "memset",             # fill with a constant
    "iota",               # materialise an affine index expression
    "random",             # uniform [0, 1) values (nl.rand, dropout)
    "activation",         # ScalarE: func(data * scale + bias)
    "tensor_tensor",      # VectorE: op(data0, data1)
    "tensor_scalar",      # VectorE: op1(op0(data, operand0), operand1)
    "select",             # where(cond, on_true, on_false)
    "affine_select",      # where(affine predicate, on_true, scalar)
    "tensor_reduce",      # reduce free axes
    "partition_reduce",   # GpSimd: reduce across partitions, [P, F] -> [1, F]
    "matmul",             # TensorE: stationary.T @ moving, fp32 into PSUM
    "transpose",          # swap partition and free axis of a 2-D tile
    "bn_stats",           # per-partition mean/variance statistics
    "bn_aggr",            # aggregate bn_stats into mean and variance
    "tensor_tensor_scan",  # running op1(op0(prev, data0), data1) along the free axis
})

#: Binary ALU operators (tensor_tensor, tensor_scalar, accumulation, reductions).
ALU_OPS = frozenset({
    "add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "mod", "fmod",
    "equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
    "logical_and", "logical_or", "logical_xor",
    "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift",
})

#: ALU operators whose result is a boolean.
COMPARISON_OPS = frozenset({
    "equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
    "logical_and", "logical_or", "logical_xor",
})

#: Operators usable for reductions and for accumulation across affine_range iterations
#: (they must be associative).
REDUCE_OPS = frozenset({"add", "multiply", "maximum", "minimum", "logical_and", "logical_or",
                        "bitwise_and", "bitwise_or", "bitwise_xor"})

#: Activation (unary) functions of ScalarE / the element-wise unary language ops.
ACTIVATIONS = frozenset({
    "copy", "abs", "negative", "sign", "trunc", "floor", "ceil", "exp", "log", "cos", "sin",
    "tan", "tanh", "arctan", "sqrt", "rsqrt", "sigmoid", "relu", "gelu", "gelu_dx",
    "gelu_apprx_tanh", "silu", "silu_dx", "erf", "erf_dx", "softplus", "mish", "square",
    "reciprocal", "logical_not", "invert",
})
