"""The kernel executor on hand-written IR: strided views, masks, accumulation across batch axes,
NaN for uninitialised memory, out-of-bounds errors and the handler table."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from emulator.kernel_exec import OutOfBoundsAccessError, run_kernel
from emulator.kernel_exec.alu import ACTIVATIONS, ALU
from emulator.kernel_exec.handlers import HANDLERS
from emulator.kernel_ir.instructions import SPECS
from emulator.kernel_ir import (Access, Affine, Const, Instruction, KernelIR, Loop, SourceLoc,
                                TensorDecl, ops)

LOC = SourceLoc("k.py", 7)


def A(const=0, **terms) -> Affine:
    return Affine.make(const, terms)


def full(name, shape):
    return Access(name, shape, tuple(A(**{f"t{d}": 1}) for d in range(len(shape))))


def kernel(tensors, body, inputs, outputs, grid=(1,)):
    return KernelIR("k", grid, {t.name: t for t in tensors}, inputs, outputs, body)


def test_every_op_has_a_handler_and_every_alu_name_an_implementation():
    from emulator import machine
    from emulator.kernel_ir import ir

    assert set(HANDLERS) == set(SPECS)
    assert machine.MEMORY_SPACES == ir.MEMORY_SPACES
    assert set(ALU) == set(ops.ALU_OPS)
    assert set(ACTIVATIONS) == set(ops.ACTIVATIONS)


def grid_copy_kernel(rows=4, cols=3):
    """out[p0*2 + t0, p1*2 + t1] = 2 * x[...] on a (rows, cols) grid of 2x2 tiles."""
    idx = (A(p0=2, t0=1), A(p1=2, t1=1))
    tensors = [TensorDecl("x", (rows * 2, cols * 2), "float32", "hbm", "input"),
               TensorDecl("out", (rows * 2, cols * 2), "float32", "shared_hbm", "output"),
               TensorDecl("a", (2, 2), "float32", "sbuf", init="defined"),
               TensorDecl("b", (2, 2), "float32", "sbuf", init="defined")]
    body = [Instruction("load", full("a", (2, 2)), (Access("x", (2, 2), idx),), loc=LOC),
            Instruction("tensor_scalar", full("b", (2, 2)), (full("a", (2, 2)), Const(2.0)),
                        {"op0": "multiply", "reverse0": False}, loc=LOC),
            Instruction("store", Access("out", (2, 2), idx), (full("b", (2, 2)),), loc=LOC)]
    return kernel(tensors, body, ("x",), ("out",), (rows, cols))


def test_grid_runs_as_one_batched_operation_per_instruction(monkeypatch):
    calls = []
    for op in ("load", "tensor_scalar", "store"):
        h = HANDLERS[op]
        monkeypatch.setitem(HANDLERS, op, lambda r, i, h=h: (calls.append(i.op), h(r, i)))
    x = np.arange(48, dtype=np.float32).reshape(8, 6)
    (out,) = run_kernel(grid_copy_kernel(), [x])
    np.testing.assert_array_equal(out, 2 * x)
    # 12 programs, one call per instruction; the store is done by its producer (forwarding).
    assert calls == ["load", "tensor_scalar"]


def test_one_program_computes_straight_into_its_output(monkeypatch):
    """With a grid of one program the store's destination does not use p0 (extent 1, so there
    is nothing to collapse): the producer computes into the output itself, as with bigger
    grids, instead of into a temporary that the store then copies."""
    from emulator.kernel_exec import alu
    tensors = [TensorDecl("x", (4, 6), "float32", "hbm", "input"),
               TensorDecl("out", (4, 6), "float32", "shared_hbm", "output"),
               TensorDecl("a", (4, 6), "float32", "sbuf", init="defined"),
               TensorDecl("b", (4, 6), "float32", "sbuf", init="defined")]
    body = [Instruction("load", full("a", (4, 6)), (full("x", (4, 6)),), loc=LOC),
            Instruction("tensor_scalar", full("b", (4, 6)), (full("a", (4, 6)), Const(2.0)),
                        {"op0": "multiply", "reverse0": False}, loc=LOC),
            Instruction("store", full("out", (4, 6)), (full("b", (4, 6)),), loc=LOC)]
    outs = []
    binary = alu.binary
    monkeypatch.setattr(alu, "binary", lambda op, a, b, out=None: (
        outs.append(out), binary(op, a, b, out))[1])
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    (out,) = run_kernel(kernel(tensors, body, ("x",), ("out",)), [x])
    np.testing.assert_array_equal(out, 2 * x)
    assert outs[0] is not None and np.shares_memory(outs[0], out)


def test_affine_access_is_a_strided_view_not_a_copy():
    from emulator.kernel_exec.access import Context, Storage, plan_access

    arr = np.arange(64, dtype=np.float32).reshape(8, 8)
    ctx = Context(("p0",), (4,), {}, {"p0": 4})
    plan = plan_access(Storage(arr, ()), Access("x", (2, 4), (A(p0=2, t0=1), A(t1=2))), ctx)
    view = plan.view(arr)
    assert np.shares_memory(view, arr)
    np.testing.assert_array_equal(view, arr.reshape(4, 2, 8)[:, :, ::2])


def test_uninitialised_sbuf_reads_nan():
    tensors = [TensorDecl("x", (2, 2), "float32", "hbm", "input"),
               TensorDecl("out", (2, 2), "float32", "shared_hbm", "output"),
               TensorDecl("s", (2, 2), "float32", "sbuf")]
    body = [Instruction("alloc", full("s", (2, 2))),
            Instruction("load", Access("s", (1, 2), (A(0), A(t1=1))),
                        (Access("x", (1, 2), (A(0), A(t1=1))),)),
            Instruction("store", full("out", (2, 2)), (full("s", (2, 2)),))]
    (out,) = run_kernel(kernel(tensors, body, ("x",), ("out",)), [np.ones((2, 2), np.float32)])
    np.testing.assert_array_equal(out[0], 1.0)
    assert np.isnan(out[1]).all()


def test_unmasked_out_of_bounds_access_names_the_access():
    k = grid_copy_kernel()
    k.grid = (5, 3)  # one row of programs too many
    with pytest.raises(OutOfBoundsAccessError) as e:
        run_kernel(k, [np.zeros((8, 6), np.float32)])
    msg = str(e.value)
    assert "kernel 'k' at k.py:7" in msg and "out-of-bounds access" in msg
    assert "hbm tensor 'x'" in msg and "0..9" in msg and "[8, 6]" in msg


def test_masked_access_skips_out_of_bounds_elements():
    k = grid_copy_kernel()
    k.grid = (5, 3)
    mask = (A(7, p0=-2, t0=-1),)  # p0*2 + t0 <= 7
    for ins in k.body:
        if ins.op in ("load", "store"):
            ins.mask = mask
    x = np.arange(48, dtype=np.float32).reshape(8, 6)
    (out,) = run_kernel(k, [x])
    np.testing.assert_array_equal(out, 2 * x)


def test_accumulation_over_a_vectorised_loop_reduces_the_loop_axis(caplog):
    # acc[t0, t1] += x[l1 * 2 + t0, t1] for l1 in affine_range(4)
    tensors = [TensorDecl("x", (8, 3), "float32", "hbm", "input"),
               TensorDecl("out", (2, 3), "float32", "shared_hbm", "output"),
               TensorDecl("acc", (2, 3), "float32", "psum"),
               TensorDecl("t", (2, 3), "float32", "sbuf", init="defined")]
    loop = Loop("l1", 4, "affine", [
        Instruction("load", full("t", (2, 3)), (Access("x", (2, 3), (A(l1=2, t0=1), A(t1=1))),)),
        Instruction("tensor_copy", full("acc", (2, 3)), (full("t", (2, 3)),), acc="add")])
    body = [Instruction("alloc", full("acc", (2, 3))),
            Instruction("memset", full("acc", (2, 3)), (Const(0.0),)), loop,
            Instruction("store", full("out", (2, 3)), (full("acc", (2, 3)),))]
    x = np.arange(24, dtype=np.float32).reshape(8, 3)
    with caplog.at_level(logging.DEBUG, logger="emulator.kernel_exec"):
        (out,) = run_kernel(kernel(tensors, body, ("x",), ("out",)), [x])
    np.testing.assert_array_equal(out, x.reshape(4, 2, 3).sum(axis=0))
    assert "runs as a Python loop" not in caplog.text


def test_loop_carried_dependency_falls_back_with_a_logged_reason(caplog):
    # acc = acc * 2 + x[l1] inside an affine_range: iterations depend on each other.
    tensors = [TensorDecl("x", (4, 3), "float32", "hbm", "input"),
               TensorDecl("out", (1, 3), "float32", "shared_hbm", "output"),
               TensorDecl("acc", (1, 3), "float32", "sbuf"),
               TensorDecl("t", (1, 3), "float32", "sbuf", init="defined")]
    loop = Loop("l1", 4, "affine", [
        Instruction("load", full("t", (1, 3)), (Access("x", (1, 3), (A(l1=1), A(t1=1))),)),
        Instruction("tensor_scalar", full("acc", (1, 3)), (full("acc", (1, 3)), Const(2.0)),
                    {"op0": "multiply"}),
        Instruction("tensor_tensor", full("acc", (1, 3)), (full("acc", (1, 3)), full("t", (1, 3))),
                    {"op": "add"})], LOC)
    body = [Instruction("alloc", full("acc", (1, 3))),
            Instruction("memset", full("acc", (1, 3)), (Const(0.0),)), loop,
            Instruction("store", full("out", (1, 3)), (full("acc", (1, 3)),))]
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    with caplog.at_level(logging.DEBUG, logger="emulator.kernel_exec"):
        (out,) = run_kernel(kernel(tensors, body, ("x",), ("out",)), [x])
    ref = np.zeros(3, np.float32)
    for i in range(4):
        ref = ref * 2 + x[i]
    np.testing.assert_array_equal(out[0], ref)
    assert "runs as a Python loop" in caplog.text and "'acc'" in caplog.text


def test_inputs_are_never_modified():
    tensors = [TensorDecl("x", (2, 2), "float32", "hbm", "input"),
               TensorDecl("t", (2, 2), "float32", "sbuf", init="defined")]
    body = [Instruction("load", full("t", (2, 2)), (full("x", (2, 2)),)),
            Instruction("store", full("x", (2, 2)), (Const(5.0),))]
    x = np.zeros((2, 2), np.float32)
    (out,) = run_kernel(kernel(tensors, body, ("x",), ("x",)), [x])
    assert (x == 0).all() and (out == 5).all()


def _zeros_then(*instructions, shape=(2, 3)):
    """acc = zeros (lazily filled); the given instructions; out = acc."""
    tensors = [TensorDecl("x", shape, "float32", "hbm", "input"),
               TensorDecl("out", shape, "float32", "shared_hbm", "output"),
               TensorDecl("acc", shape, "float32", "psum"),
               TensorDecl("t", shape, "float32", "sbuf", init="defined")]
    body = [Instruction("alloc", full("acc", shape), attrs={"fill": 0.0}),
            Instruction("load", full("t", shape), (full("x", shape),)), *instructions,
            Instruction("store", full("out", shape), (full("acc", shape),))]
    return kernel(tensors, body, ("x",), ("out",))


def test_a_first_whole_sum_into_zeros_is_0_plus_x_bit_for_bit(monkeypatch):
    # -0.0 accumulated onto +0.0 is +0.0 (IEEE): the lazily skipped zeros must not change that
    from emulator.kernel_exec.runner import Runner
    fills = []
    real = Runner._fill_zeros
    monkeypatch.setattr(Runner, "_fill_zeros", staticmethod(lambda st: (fills.append(st.zero), real(st))))
    x = np.array([[-0.0, 1.5, -2.0], [np.nan, np.inf, -0.0]], np.float32)
    k = _zeros_then(Instruction("tensor_copy", full("acc", (2, 3)), (full("t", (2, 3)),), acc="add"))
    (out,) = run_kernel(k, [x])
    assert True not in fills  # the zeros were never written: the sum replaced them
    expected = np.float32(0.0) + x
    np.testing.assert_array_equal(out, expected)
    assert not np.signbit(out[0, 0]) and not np.signbit(out[1, 2])


def test_zeros_are_real_for_reads_and_partial_writes():
    x = np.arange(6, dtype=np.float32).reshape(2, 3) + 1
    part = Access("acc", (1, 3), (A(1), A(t1=1)))  # row 1 only
    acc_part = _zeros_then(Instruction("tensor_copy", part, (Access("t", (1, 3), (A(), A(t1=1))),),
                                       acc="add"))
    (out,) = run_kernel(acc_part, [x])
    np.testing.assert_array_equal(out, [[0, 0, 0], [1, 2, 3]])
    plain_part = _zeros_then(Instruction("tensor_copy", part, (Access("t", (1, 3), (A(), A(t1=1))),)))
    (out,) = run_kernel(plain_part, [x])
    np.testing.assert_array_equal(out, [[0, 0, 0], [1, 2, 3]])
    masked = _zeros_then(Instruction("tensor_copy", full("acc", (2, 3)), (full("t", (2, 3)),),
                                     acc="add", mask=(A(-1, t1=1),)))  # columns 1 and 2
    (out,) = run_kernel(masked, [x])
    np.testing.assert_array_equal(out, [[0, 2, 3], [0, 5, 6]])
    read_first = _zeros_then(Instruction("tensor_tensor", full("t", (2, 3)),
                                         (full("acc", (2, 3)), full("t", (2, 3))), {"op": "add"}),
                             Instruction("tensor_copy", full("acc", (2, 3)), (full("t", (2, 3)),),
                                         acc="add"))
    (out,) = run_kernel(read_first, [x])
    np.testing.assert_array_equal(out, x)
