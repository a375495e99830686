"""The vocabulary of the kernel IR's attributes: ALU operators and activation functions (the
instructions themselves are specified in ``instructions.py``).

Only names live here (the IR must stay NumPy-free to serialise); ``emulator.kernel_exec`` maps each
name to its NumPy implementation, and a test checks that every name has one.
"""

from __future__ import annotations

#: Binary ALU operators (tensor_tensor, tensor_scalar, accumulation, reductions).
ALU_OPS = frozenset({
    "add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "mod", "fmod",
    "equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
    "logical_and", "logical_or", "logical_xor",
    "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift",
    "abs_max", "abs_min",
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
    "gelu_apprx_tanh", "gelu_apprx_sigmoid", "gelu_apprx_sigmoid_dx", "silu", "silu_dx", "erf", "erf_dx", "softplus", "mish", "square",
    "reciprocal", "logical_not", "invert",
})
