"""TensorE: matmul (``stationary.T @ moving`` into fp32 PSUM), its MX form and transpose."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from emulator.kernel_ir import Instruction
from emulator.kernel_ir.instructions import TENSOR

from .. import alu, mx
from .registry import EngineHandlers

if TYPE_CHECKING:  # the runner imports this table
    from ..runner import Runner

HANDLERS = EngineHandlers(TENSOR)


@HANDLERS.register("matmul")
def matmul(r: Runner, ins: Instruction) -> None:
    """The contraction axis is the partition axis of both operands. Batched over grid and
    vectorised loops, as few ``numpy.matmul`` calls as possible: batch axes along which one operand
    is broadcast become rows or columns of one larger GEMM, and when the result is accumulated
    (``psum += matmul``) over a vectorised loop axis, that axis joins the contraction instead of
    materialising one product per iteration."""
    if ins.attrs.get("transpose"):
        _transpose_mode(r, ins)
        return
    st = alu.widen(r.read(ins.srcs[0])).astype(np.float32, copy=False)
    mv = alu.widen(r.read(ins.srcs[1])).astype(np.float32, copy=False)
    nb = len(r.ctx.batch_shape)
    fold = r.accumulated_axes()
    keep = [i for i in range(nb) if i not in fold]
    st, mv = _unbroadcast(st, keep), _unbroadcast(mv, keep)
    if fold:
        perm = keep + list(fold) + [nb, nb + 1]
        k = int(np.prod([r.ctx.batch_shape[i] for i in fold])) * st.shape[-2]
        st, mv = _fold(st, perm, len(keep), k), _fold(mv, perm, len(keep), k)
    res = _gemm(st, mv, len(keep))
    if not fold:
        r.write(ins, res)
        return
    res = np.expand_dims(res, tuple(fold))
    r.write(ins, res, reduced=tuple(r.ctx.batch_syms[i] for i in fold))


def _transpose_mode(r: Runner, ins: Instruction) -> None:
    """``nc_matmul(..., is_transpose=True)``: ``stationary.T`` in the stationary's dtype, values
    passed through unchanged (NaN and Inf included). The hardware computes it as a product with
    an identity ``moving``; any other moving tile is a misuse, reported here because it is data."""
    st_op, mv_op = ins.srcs[0], ins.srcs[1]
    mv = r.read(mv_op)
    k = mv.shape[-1]
    if not np.array_equal(mv, np.broadcast_to(np.eye(k, dtype=mv.dtype), mv.shape)):
        raise r.error("matmul transpose operand",
                      f"is_transpose=True needs moving {mv_op} to be the [{k}, {k}] identity "
                      "matrix (nl.shared_identity_matrix, loaded); it is not")
    x = r.read(st_op)
    r.write(ins, np.swapaxes(x, -1, -2), may_alias=not r.is_immutable(st_op.tensor))


def _gemm(st: np.ndarray, mv: np.ndarray, nb: int) -> np.ndarray:
    """``st.T @ mv`` over ``nb`` leading batch axes (extent 1 where an operand is broadcast).
    Axes where only ``st`` varies are merged into M, those where only ``mv`` varies into N, so
    an outer-product-shaped batch is one GEMM; the result is viewed back in batch order."""
    m_ax = [i for i in range(nb) if st.shape[i] > 1 and mv.shape[i] == 1]
    n_ax = [i for i in range(nb) if mv.shape[i] > 1 and st.shape[i] == 1]
    if not m_ax and not n_ax:
        return np.matmul(np.swapaxes(st, -1, -2), mv)
    b_ax = [i for i in range(nb) if i not in m_ax and i not in n_ax]
    kdim, mdim, ndim = st.shape[-2], st.shape[-1], mv.shape[-1]
    # (the other operand's axes have extent 1 here and vanish in the reshape)
    st3 = st.transpose(b_ax + n_ax + [nb] + m_ax + [nb + 1])
    st3 = st3.reshape(tuple(st.shape[i] for i in b_ax) + (kdim, -1))
    mv3 = mv.transpose(b_ax + m_ax + [nb] + n_ax + [nb + 1])
    mv3 = mv3.reshape(tuple(mv.shape[i] for i in b_ax) + (kdim, -1))
    res = np.matmul(np.swapaxes(st3, -1, -2), mv3)
    bshape = res.shape[:len(b_ax)]
    res = res.reshape(bshape + tuple(st.shape[i] for i in m_ax) + (mdim,)
                      + tuple(mv.shape[i] for i in n_ax) + (ndim,))
    pos = {i: j for j, i in enumerate(b_ax)}
    pos.update({i: len(b_ax) + j for j, i in enumerate(m_ax)})
    mpos = len(b_ax) + len(m_ax)
    pos.update({i: mpos + 1 + j for j, i in enumerate(n_ax)})
    return res.transpose([pos[i] for i in range(nb)] + [mpos, res.ndim - 1])


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


@HANDLERS.register("transpose")
def transpose(r: Runner, ins: Instruction) -> None:
    """A transposed view of the source; copied only if the source can still change."""
    src = ins.srcs[0]
    x = r.read(src)
    r.write(ins, np.swapaxes(x, -1, -2), may_alias=not r.is_immutable(src.tensor))


@HANDLERS.register("matmul_mx")
def matmul_mx(r: Runner, ins: Instruction) -> None:
    """Both packed operands dequantized with their scales (kernel_exec/mx.py), then one
    contraction over the partitions and the 4 elements of each word, in fp32."""
    tensors = r.kernel.tensors
    st_op, mv_op, st_sc, mv_sc = ins.srcs
    st = mx.dequantize(r.read(st_op), tensors[st_op.tensor].dtype, r.read(st_sc),
                       tensors[st_sc.tensor].dtype)
    mv = mx.dequantize(r.read(mv_op), tensors[mv_op.tensor].dtype, r.read(mv_sc),
                       tensors[mv_sc.tensor].dtype)
    r.write(ins, np.einsum("...kmq,...knq->...mn", st, mv, optimize=True))
