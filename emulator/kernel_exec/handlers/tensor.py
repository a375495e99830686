"""TensorE: matmul (``stationary.T @ moving`` into fp32 PSUM) and transpose."""

from __future__ import annotations

import numpy as np

from emulator.kernel_ir import Instruction

from .. import alu


def matmul(r, ins: Instruction) -> None:
    """The contraction axis is the partition axis of both operands. Batched over grid and
    vectorised loops: one ``numpy.matmul`` for all of them. When the result is accumulated
    (``psum += matmul``) over a vectorised loop axis, that axis joins the contraction instead of
    materialising one product per iteration."""
    st = alu.widen(r.read(ins.srcs[0])).astype(np.float32, copy=False)
    mv = alu.widen(r.read(ins.srcs[1])).astype(np.float32, copy=False)
    fold = r.accumulated_axes()
    if not fold:
        r.write(ins, np.matmul(np.swapaxes(st, -1, -2), mv))
        return
    nb = len(r.ctx.batch_shape)
    keep = [i for i in range(nb) if i not in fold]
    perm = keep + list(fold) + [nb, nb + 1]
    k = int(np.prod([r.ctx.batch_shape[i] for i in fold])) * st.shape[-2]
    st2 = _fold(_unbroadcast(st, keep), perm, len(keep), k)
    mv2 = _fold(_unbroadcast(mv, keep), perm, len(keep), k)
    res = np.matmul(np.swapaxes(st2, -1, -2), mv2)
    res = res.reshape(tuple(1 if i in fold else r.ctx.batch_shape[i] for i in range(nb))
                      + res.shape[-2:])
    r.write(ins, res, reduced=tuple(r.ctx.batch_syms[i] for i in fold))


def _unbroadcast(x: np.ndarray, axes: list[int]) -> np.ndarray:
    """Shrink to extent 1 the given batch axes along which ``x`` is a broadcast (stride 0), so
    that reshaping copies only real data; ``numpy.matmul`` broadcasts them back."""
    idx = tuple(slice(0, 1) if i in axes and x.strides[i] == 0 else slice(None)
                for i in range(x.ndim))
    return x[idx]


def _fold(x: np.ndarray, perm: list[int], nkeep: int, k: int) -> np.ndarray:
    """Move the folded batch axes next to the contraction axis and merge them into it."""
    y = x.transpose(perm)
    return y.reshape(y.shape[:nkeep] + (k, y.shape[-1]))


def transpose(r, ins: Instruction) -> None:
    x = r.read(ins.srcs[0])
    r.write(ins, np.swapaxes(x, -1, -2), may_alias=True)


HANDLERS = {"matmul": matmul, "transpose": transpose}
