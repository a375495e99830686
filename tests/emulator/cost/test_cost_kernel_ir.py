"""Kernel-IR costs: nc_matmul by the reference's formula, activation on ScalarE, tensor ops on
VectorE, load/store over DMA, all times loop trip counts and the grid size."""
from __future__ import annotations

import math

from emulator.cost import constants as C
from emulator.cost.engines import DMA, SCALAR, TENSOR, VECTOR
from emulator.cost.kernel_ir import kernel_cost
from emulator.kernel_ir import ir


def _acc(tensor, shape):
    return ir.Access(tensor, tuple(shape), tuple(ir.Affine() for _ in shape))


def _kernel(body, grid=(1,), dtype="float32"):
    tensors = {
        "x": ir.TensorDecl("x", (128, 512), dtype, "hbm", "input"),
        "w": ir.TensorDecl("w", (128, 128), dtype, "sbuf"),
        "m": ir.TensorDecl("m", (128, 512), dtype, "sbuf"),
        "p": ir.TensorDecl("p", (128, 512), "float32", "psum"),
        "y": ir.TensorDecl("y", (128, 512), "float32", "shared_hbm", "output"),
    }
    return ir.KernelIR("k", grid, tensors, ("x",), ("y",), body)


def test_matmul_follows_the_formula_and_fp32_is_four_times():
    mm = ir.Instruction("matmul", _acc("p", (128, 512)), (_acc("w", (128, 128)), _acc("m", (128, 512))))
    assert kernel_cost(_kernel([mm])) == {TENSOR: 4 * 512}
    assert kernel_cost(_kernel([mm], dtype="bfloat16")) == {TENSOR: 512}
    short = ir.Instruction("matmul", _acc("p", (128, 16)), (_acc("w", (128, 32)), _acc("m", (128, 16))))
    assert kernel_cost(_kernel([short], dtype="bfloat16")) == {TENSOR: 32}


def test_engines_loops_and_grid_multiply():
    load = ir.Instruction("load", _acc("m", (128, 512)), (_acc("x", (128, 512)),))
    act = ir.Instruction("activation", _acc("m", (128, 512)), (_acc("m", (128, 512)),), {"op": "exp"})
    add = ir.Instruction("tensor_tensor", _acc("m", (128, 512)), (_acc("m", (128, 512)), _acc("m", (128, 512))),
                         {"op": "add"})
    store = ir.Instruction("store", _acc("y", (128, 512)), (_acc("m", (128, 512)),))
    loop = ir.Loop("l0", 3, "affine", [act, add])
    cost = kernel_cost(_kernel([load, loop, store], grid=(2, 2)))
    dma = C.DMA_FIXED_CYCLES + math.ceil(128 * 512 * 4 / C.DMA_BYTES_PER_CYCLE)
    assert cost[DMA] == 4 * 2 * dma
    assert cost[SCALAR] == 4 * 3 * (C.INSTRUCTION_OVERHEAD_CYCLES + 512)
    assert cost[VECTOR] == 4 * 3 * (C.INSTRUCTION_OVERHEAD_CYCLES + 512)
    assert TENSOR not in cost
