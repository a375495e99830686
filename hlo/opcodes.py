"""XLA's opcode table: every HLO opcode with its spelling, arity and class.

One definition used by the HLO text parser (which opcodes exist, which `<op>-start` shorthands
are async wrappers), the printer, and the backend compiler (operand counts in the verifier, the
generic lowering of element-wise opcodes, the "not supported" error naming an opcode).

The facts are those of XLA's `HLO_OPCODE_LIST` (xla/hlo/ir/hlo_opcode.h): the name is
`HloOpcodeString`, the arity `HloOpcodeArity` (None for `kHloOpcodeIsVariadic`). The list is
that of the XLA inside jaxlib 0.10.2, whose parser knows exactly these 133 opcodes, so an opcode
outside the table is a parse error here as it is there (later XLA adds `atan`,
`collective-reduce` and `shuffle`).

The class is ours, a coarse family that says how the compiler treats the opcode:
ELEMENTWISE (result element i depends on operand element i only; operands have the result's
dimensions), DATA (moves or reinterprets values), REDUCTION (combines elements with a called
computation), LINALG (contractions, transforms, factorisations), CONTROL (calls computations),
COLLECTIVE (talks to other replicas or partitions), ASYNC (start/update/done pairs), IO (host
and channel transfers, tokens), RNG (random numbers).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

__all__ = ["ASYNC", "CLASSES", "COLLECTIVE", "CONTROL", "DATA", "ELEMENTWISE", "IO", "LINALG", "OPCODES",
           "REDUCTION", "RNG", "Opcode", "async_shorthand", "can_wrap", "opcode"]

ELEMENTWISE = "elementwise"
DATA = "data"
REDUCTION = "reduction"
LINALG = "linalg"
CONTROL = "control"
COLLECTIVE = "collective"
ASYNC = "async"
IO = "io"
RNG = "rng"
CLASSES = (ELEMENTWISE, DATA, REDUCTION, LINALG, CONTROL, COLLECTIVE, ASYNC, IO, RNG)


@dataclass(frozen=True)
class Opcode:
    """One HLO opcode: XLA's spelling, operand count (None: variadic) and our class."""

    name: str
    arity: Optional[int]
    cls: str

    @property
    def variadic(self) -> bool:
        return self.arity is None


V = None  # kHloOpcodeIsVariadic
E, D, R, L, C, X, A, I, G = ELEMENTWISE, DATA, REDUCTION, LINALG, CONTROL, COLLECTIVE, ASYNC, IO, RNG

_TABLE = (
    ("abs", 1, E), ("acos", 1, E), ("acosh", 1, E), ("add", 2, E), ("add-dependency", 2, D),
    ("after-all", V, I), ("all-gather", V, X), ("all-gather-done", 1, X), ("all-gather-start", V, X),
    ("all-reduce", V, X), ("all-reduce-done", 1, X), ("all-reduce-start", V, X), ("all-to-all", V, X),
    ("and", 2, E), ("asin", 1, E), ("asinh", 1, E), ("async-done", 1, A), ("async-start", V, A),
    ("async-update", V, A), ("atan2", 2, E), ("atanh", 1, E), ("batch-norm-grad", 5, L),
    ("batch-norm-inference", 5, L), ("batch-norm-training", 3, L), ("bitcast", 1, D),
    ("bitcast-convert", 1, D), ("broadcast", 1, D), ("call", V, C), ("cbrt", 1, E), ("ceil", 1, E),
    ("cholesky", 1, L), ("clamp", 3, E), ("count-leading-zeros", 1, E), ("collective-broadcast", V, X),
    ("collective-permute", V, X), ("collective-permute-done", 1, X), ("collective-permute-start", V, X),
    ("compare", 2, E), ("complex", 2, E), ("concatenate", V, D), ("conditional", V, C), ("constant", 0, D),
    ("convert", 1, E), ("convolution", V, L), ("copy", 1, E), ("copy-done", 1, A), ("copy-start", 1, A),
    ("cosine", 1, E), ("cosh", 1, E), ("custom-call", V, C), ("divide", 2, E), ("domain", 1, D),
    ("dot", 2, L), ("dynamic-reshape", V, D), ("dynamic-slice", V, D), ("dynamic-update-slice", V, D),
    ("erf", 1, E), ("exponential", 1, E), ("exponential-minus-one", 1, E), ("fft", 1, L), ("floor", 1, E),
    ("fusion", V, C), ("gather", 2, D), ("get-dimension-size", 1, D), ("get-tuple-element", 1, D),
    ("imag", 1, E), ("infeed", 1, I), ("iota", 0, D), ("is-finite", 1, E), ("log", 1, E),
    ("log-plus-one", 1, E), ("logistic", 1, E), ("map", V, R), ("maximum", 2, E), ("minimum", 2, E),
    ("mulhi", 2, E), ("multiply", 2, E), ("negate", 1, E), ("not", 1, E), ("opt-barrier", 1, D),
    ("or", 2, E), ("outfeed", 2, I), ("pad", 2, D), ("parameter", 0, D), ("partition-id", 0, X),
    ("popcnt", 1, E), ("power", 2, E), ("ragged-all-to-all", 6, X), ("ragged-dot", 3, L), ("real", 1, E),
    ("recv", 1, I), ("recv-done", 1, I), ("reduce", V, R), ("reduce-precision", 1, E),
    ("reduce-scatter", V, X), ("reduce-window", V, R), ("remainder", 2, E), ("replica-id", 0, X),
    ("reshape", 1, D), ("reverse", 1, D), ("rng", V, G), ("rng-bit-generator", 1, G),
    ("rng-get-and-update-state", 0, G), ("round-nearest-afz", 1, E), ("round-nearest-even", 1, E),
    ("rsqrt", 1, E), ("scaled-dot", 4, L), ("scan", V, C), ("scatter", V, D), ("select", 3, E),
    ("select-and-scatter", 3, R), ("send", 2, I), ("send-done", 1, I), ("set-dimension-size", 2, D),
    ("shift-left", 2, E), ("shift-right-arithmetic", 2, E), ("shift-right-logical", 2, E), ("sign", 1, E),
    ("sine", 1, E), ("sinh", 1, E), ("slice", 1, D), ("sort", V, R), ("sqrt", 1, E),
    ("stochastic-convert", 2, E), ("subtract", 2, E), ("tan", 1, E), ("tanh", 1, E), ("topk", 1, R),
    ("transpose", 1, D), ("triangular-solve", 2, L), ("tuple", V, D), ("while", 1, C), ("xor", 2, E),
)

#: opcode name -> its record; the set of opcodes HLO text may use.
OPCODES: Dict[str, Opcode] = {name: Opcode(name, arity, cls) for name, arity, cls in _TABLE}
del V, E, D, R, L, C, X, A, I, G


def opcode(name: str) -> Optional[Opcode]:
    """The record of opcode `name`, or None if XLA has no such opcode."""
    return OPCODES.get(name)


_ASYNC_PARTS = ("start", "update", "done")


def async_shorthand(spelling: str) -> Tuple[Optional[str], Optional[str]]:
    """XLA's async shorthand: `negate-start` -> ("negate", "start"), i.e. an async-start wrapping
    one `negate`. Real opcodes (`all-reduce-start`, `copy-done`) and unknown words -> (None, None)."""
    if spelling in OPCODES:
        return None, None
    for part in _ASYNC_PARTS:
        base = spelling[: -len(part) - 1]
        if spelling.endswith("-" + part) and base in OPCODES and base not in ("parameter", "constant"):
            return base, part
    return None, None


def can_wrap(name: str) -> bool:
    """Whether an async op wrapping one `name` can be written in the shorthand `name-start`:
    parameters and constants can not be, nor opcodes whose `-start` spelling is an opcode itself."""
    return name in OPCODES and name not in ("parameter", "constant") and \
        all(f"{name}-{part}" not in OPCODES for part in _ASYNC_PARTS)
