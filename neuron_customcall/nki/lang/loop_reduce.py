"""Beta 1's ``nl.loop_reduce(x, op, loop_indices)``: reduce ``x`` over the iterations of loops.

The reference defines it as ``b = nisa.tensor_tensor(data1=b, data2=x, op=op)`` on a tile ``b``
made before the loops, the destination being also the right operand. So it traces to an
accumulator tile initialised with ``op``'s identity right before the outermost of
``loop_indices`` and one accumulating ``tensor_copy`` (``acc = op(acc, x)``) in the loop body;
the returned tile holds the reduction over all iterations once the loops are done (inside them,
what the iterations so far gave). Numbers among ``loop_indices`` name no loop.
"""

from __future__ import annotations

import numpy as np

from emulator.kernel_ir import divmod as dm
from emulator.kernel_ir import dtypes as ir_dtypes
from emulator.kernel_ir import ops

from .. import dtypes as nkd
from ..indexing import Idx
from ..tile import Tile
from ..tracer import current
from .operands import alu_op_name, operand


def _identity(op: str, dtype: str):
    """The value ``v`` with ``op(v, x) == x`` for every ``x`` of ``dtype``."""
    np_dt = ir_dtypes.to_numpy(dtype)
    if op in ("add", "logical_or", "bitwise_or", "bitwise_xor"):
        return 0
    if op == "multiply" or op == "logical_and":
        return 1
    if op == "bitwise_and":
        return -1 if np.issubdtype(np_dt, np.signedinteger) else int(np.iinfo(np_dt).max)
    floats = nkd.is_float(dtype)
    if op == "maximum":
        return float("-inf") if floats else int(np.iinfo(np_dt).min)
    return float("inf") if floats else int(np.iinfo(np_dt).max)  # minimum


def _loop_vars(loop_indices) -> list[str]:
    items = loop_indices if isinstance(loop_indices, (list, tuple)) else [loop_indices]
    out = []
    for item in items:
        if isinstance(item, Idx):
            out += [s for s in map(dm.base_of, item.scalar_terms()) if s.startswith("l")]
        elif not isinstance(item, (int, np.integer)):
            raise current().error("loop_reduce loop_indices", f"{item!r} is not a loop index")
    return out


def loop_reduce(x, op, loop_indices, *, dtype=None, mask=None) -> Tile:
    """``op``-reduce ``x`` over the iterations of ``loop_indices`` (see the module docstring)."""
    tr = current()
    if mask is not None:
        raise tr.error("loop_reduce mask", "a masked loop_reduce is not supported")
    x = operand(x)
    if not isinstance(x, Tile):
        raise tr.error("loop_reduce operand", f"loop_reduce reduces a tile, not {x!r}")
    name = alu_op_name(op)
    if name not in ops.REDUCE_OPS:
        raise tr.error("loop_reduce operator", f"{name} is not associative: it can not reduce "
                       f"over loop iterations (use one of {sorted(ops.REDUCE_OPS)})")
    out_dtype = nkd.name_of(dtype) if dtype is not None else x.dtype_name
    acc = Tile(tr, tr.declare(tuple(x.shape), out_dtype, "sbuf", name="loop_reduce"))
    init = tr.emit("alloc", acc, fill=_identity(name, out_dtype))
    loops = sorted(set(_loop_vars(loop_indices)), key=lambda v: int(v[1:]))
    if loops:
        tr.hoist_before_loop(loops[0], init)
    tr.emit("tensor_copy", acc, x, acc=name)
    return acc
