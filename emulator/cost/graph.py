"""Program instructions (graph-level ops) -> estimated cycles per engine.

Each op of the instruction set names its cost rule (emulator.program.ops); RULES maps a rule to
a cost function of the instruction's HandlerContext (op, attributes, operand and result types).
`coster` turns an instruction into a callable returning the cost of one execution: a constant
for most ops, the counters of the last run for GpSimd kernels. Control flow costs nothing itself: the instructions of its bodies are costed (and
recorded) each time they execute, so a loop costs its body times its iterations.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

from emulator.cost import constants as C
from emulator.cost import dma, neuronlink, tensor, vector
from emulator.cost.engines import NONE, TENSOR, Cost
from emulator.cost.kernels import kernel_coster
from emulator.program.ops import OPS

log = logging.getLogger(__name__)

CostFunction = Callable[[Any], Cost]


def _free(ctx: Any) -> Cost:
    """Views, tuples, constants and control flow: nothing on any engine."""
    return {}


def _lapack(ctx: Any) -> Cost:
    """A LAPACK routine (emulator/ops/lapack.py) on a batch of m x n matrices: O(m n min(m, n))
    work that blocked LAPACK spends mostly in matrix products, so it is estimated as one fp32
    matmul of that size per matrix on TensorE."""
    shape = ctx.in_types[0][1]
    m, n = shape[-2], shape[-1]
    return {TENSOR: C.INSTRUCTION_OVERHEAD_CYCLES + tensor.matmul_cycles(math.prod(shape[:-2]), m, min(m, n), n, True)}


#: cost rule name (emulator.program.ops.OpSpec.cost) -> cost function of the instruction. The
#: rules of PER_EXECUTION (kernels, collectives) are not here: their cost is known per execution.
RULES: dict[str, CostFunction] = {
    "free": _free,
    "vector": vector.elementwise, "activation": vector.activation,
    "over_inputs": vector.over_inputs, "windowed": vector.windowed, "sort": vector.sort, "fft": vector.fft,
    "two_passes": vector.passes(2), "three_passes": vector.passes(3), "four_passes": vector.passes(4),
    "dma": dma.result_bytes, "broadcast": dma.broadcast, "dma_update": dma.operand_bytes(1),
    "dma_scatter": dma.operand_bytes(-1),
    "dot": tensor.dot, "convolution": tensor.convolution, "lapack": _lapack,
}
#: rules whose cost is known per execution: rule -> (instruction -> the cost of one execution)
PER_EXECUTION: dict[str, Callable[[Any], Callable[[], Cost]]] = {
    "kernel": kernel_coster,
    # the group, and so the cores and chips it spans, is the running device's
    "collective": neuronlink.instruction_coster,
}
_unknown = sorted(f"{s.name}: {s.cost}" for s in OPS.values() if s.cost not in RULES and s.cost not in PER_EXECUTION)
assert not _unknown, f"ops with unknown cost rules: {_unknown}"


def coster(ctx: Any) -> Callable[[], Cost]:
    """The cost of one execution of the instruction `ctx` describes (built at load time)."""
    spec = OPS[ctx.op]
    if spec.cost in PER_EXECUTION:
        return PER_EXECUTION[spec.cost](ctx)
    fn = RULES[spec.cost]
    try:
        cost = fn(ctx)
    except (KeyError, IndexError, TypeError, ValueError) as e:  # a shape the formula does not cover
        log.debug("cost of %s (%s) unknown: %s", ctx.name, ctx.op, e)
        cost = {}
    cost = {e: c for e, c in cost.items() if e != NONE and c > 0}
    return lambda: cost
