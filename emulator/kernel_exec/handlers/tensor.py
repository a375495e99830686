"""TensorE: matmul (``stationary.T @ moving`` into fp32 PSUM) and transpose."""

from __future__ import annotations

import numpy as np

from emulator.kernel_ir import Instruction

from .. import alu


def matmul(r, ins: Instruction) -> None:
    """The contraction axis is the partition axis of both operands. Batched over grid and
    vectorised loops: one ``numpy.matmul`` for all of them."""
    st = alu.widen(r.read(ins.srcs[0])).astype(np.float32, copy=False)
    mv = alu.widen(r.read(ins.srcs[1])).astype(np.float32, copy=False)
    r.write(ins, np.matmul(np.swapaxes(st, -1, -2), mv))


def transpose(r, ins: Instruction) -> None:
    x = r.read(ins.srcs[0])
    r.write(ins, np.swapaxes(x, -1, -2), may_alias=True)


HANDLERS = {"matmul": matmul, "transpose": transpose}
