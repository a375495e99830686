"""Traced kernels as IR: serialised, deserialised and executed give the same results; the hook
frameworks use; vectorisation decisions."""

from __future__ import annotations

import logging

import numpy as np

from emulator.kernel_exec import run_kernel
from emulator.kernel_ir import from_bytes, to_bytes, walk_loops
from neuron_customcall import nki
from neuron_customcall.nki import TensorSpec, trace_kernel

from test_nki_kernels import (causal_attention_kernel, layernorm_kernel, matmul_tiled_kernel,
                              rand, scale_rows_kernel, tensor_add_kernel)


def roundtrip_run(kernel, args, grid=(1,)):
    traced = kernel.trace(args, {}, grid)
    ir2 = from_bytes(to_bytes(traced.ir))
    assert ir2 == traced.ir
    return run_kernel(ir2, [np.asarray(a) for a in args])[0]


def test_serialised_ir_runs_to_the_same_results():
    a, b = rand(256, 1024), rand(256, 1024)
    np.testing.assert_array_equal(roundtrip_run(tensor_add_kernel, [a, b], (2, 2)),
                                  tensor_add_kernel[2, 2](a, b))
    lhsT, rhs = rand(256, 128), rand(256, 512)
    np.testing.assert_array_equal(roundtrip_run(matmul_tiled_kernel, [lhsT, rhs]),
                                  matmul_tiled_kernel(lhsT, rhs))
    q, k, v = rand(128, 64), rand(128, 64), rand(128, 64)
    np.testing.assert_array_equal(roundtrip_run(causal_attention_kernel, [q, k, v]),
                                  causal_attention_kernel(q, k, v))
    x, g, bb = rand(128, 256), rand(256), rand(256)
    np.testing.assert_array_equal(roundtrip_run(layernorm_kernel, [x, g, bb]),
                                  layernorm_kernel(x, g, bb))
    x = rand(300, 40)
    np.testing.assert_array_equal(roundtrip_run(scale_rows_kernel, [x], (3,)),
                                  scale_rows_kernel[3](x))


def test_trace_hook_needs_only_shapes_and_dtypes():
    spec = TensorSpec((256, 1024), "float32")
    traced = trace_kernel(tensor_add_kernel.func, [spec, spec], {}, (2, 2))
    assert traced.outputs == (spec,)
    assert traced.ir.grid == (2, 2)
    assert [traced.ir.tensors[n].memory for n in traced.ir.inputs] == ["hbm", "hbm"]
    assert traced.ir.tensors[traced.ir.outputs[0]].memory == "shared_hbm"


def test_static_arguments_are_part_of_the_trace_key():
    @nki.jit
    def scale(x, factor):
        from neuron_customcall.nki import language as nl
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.multiply(nl.load(x), factor))
        return out

    x = rand(4, 4)
    np.testing.assert_array_equal(scale(x, 2.0), 2 * x)
    np.testing.assert_array_equal(scale(x, 3.0), 3 * x)
    assert scale.cache_size == 2


def test_independent_affine_loops_run_vectorised(caplog):
    lhsT, rhs = rand(256, 256), rand(256, 1024)
    with caplog.at_level(logging.DEBUG, logger="emulator.kernel_exec"):
        matmul_tiled_kernel(lhsT, rhs)
    assert "runs as a Python loop" not in caplog.text
    assert len(list(walk_loops(matmul_tiled_kernel.trace([lhsT, rhs]).ir.body))) == 3


def test_dependent_affine_loop_falls_back_and_logs_why(caplog):
    @nki.jit
    def running_max(x):
        from neuron_customcall.nki import language as nl
        out = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.shared_hbm)
        m = nl.full((128, x.shape[1]), -1e30, nl.float32)
        for i in nl.affine_range(x.shape[0] // 128):  # wrongly declared independent
            m[...] = nl.maximum(m, nl.load(x[i * 128:(i + 1) * 128, :]))
        nl.store(out, value=m)
        return out

    x = rand(512, 8)
    with caplog.at_level(logging.DEBUG, logger="emulator.kernel_exec"):
        got = running_max(x)
    np.testing.assert_array_equal(got, x.reshape(4, 128, 8).max(axis=0))
    assert "runs as a Python loop" in caplog.text
    assert "iterations may depend on each other through tensor" in caplog.text


def test_programs_that_read_each_others_writes_run_one_at_a_time(caplog):
    @nki.jit
    def chain(buf, x):
        from neuron_customcall.nki import language as nl
        p = nl.program_id(0)
        i_f = nl.arange(x.shape[1])[None, :]
        prev = nl.load(buf[p + nl.arange(1)[:, None], i_f])
        nl.store(buf[p + 1 + nl.arange(1)[:, None], i_f],
                 value=nl.add(prev, nl.load(x[p + nl.arange(1)[:, None], i_f])))

    x = rand(4, 8)
    buf = np.zeros((5, 8), np.float32)
    with caplog.at_level(logging.DEBUG, logger="emulator.kernel_exec"):
        chain[4](buf, x)
    np.testing.assert_allclose(buf[1:], np.cumsum(x, axis=0), rtol=1e-6)
    assert "runs one program at a time" in caplog.text and "'buf'" in caplog.text


def test_independent_programs_run_as_batch_axes(caplog):
    a, b = rand(256, 1024), rand(256, 1024)
    with caplog.at_level(logging.DEBUG, logger="emulator.kernel_exec"):
        tensor_add_kernel[2, 2](a, b)
    assert "one program at a time" not in caplog.text


def test_independent_sequential_loop_is_vectorised_dependent_one_is_not(caplog):
    from neuron_customcall.nki import language as nl

    @nki.jit
    def seq(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        for i in nl.sequential_range(x.shape[0] // 128):       # independent iterations
            t = nl.load(x[i * 128:(i + 1) * 128, :])
            nl.store(out[i * 128:(i + 1) * 128, :], value=nl.multiply(t, 2.0))
        acc = nl.zeros((128, x.shape[1]), nl.float32)
        for i in nl.sequential_range(x.shape[0] // 128):       # carried through acc
            acc[...] = nl.add(nl.multiply(acc, 0.5), nl.load(x[i * 128:(i + 1) * 128, :]))
        nl.store(out[0:128, :], value=acc)
        return out

    x = rand(512, 8)
    with caplog.at_level(logging.DEBUG, logger="emulator.kernel_exec"):
        got = seq(x)
    ref = 2 * x
    acc = np.zeros((128, 8), np.float32)
    for i in range(4):
        acc = acc * 0.5 + x[i * 128:(i + 1) * 128]
    ref[:128] = acc
    np.testing.assert_allclose(got, ref, rtol=1e-6)
    assert caplog.text.count("runs as a Python loop") == 1
    assert "sequential_range loop" in caplog.text


def test_constants_travel_inside_the_serialised_ir():
    from neuron_customcall.nki import language as nl

    table = np.arange(128 * 4, dtype=np.float32).reshape(128, 4) / 7

    @nki.jit
    def add_table(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        c = nl.shared_constant(table)
        nl.store(out, value=nl.add(nl.load(x), nl.load(c)))
        return out

    x = rand(128, 4)
    np.testing.assert_allclose(add_table(x), x + table, rtol=1e-6)
    traced = add_table.trace([x])
    data = to_bytes(traced.ir)
    ir2 = from_bytes(data)
    assert ir2 == traced.ir and len(data) > table.nbytes
    np.testing.assert_allclose(run_kernel(ir2, [x])[0], x + table, rtol=1e-6)


def test_batches_too_big_for_memory_run_in_chunks_with_the_same_results(monkeypatch, caplog):
    from emulator.kernel_exec import runner
    from test_nki_kernels import (flash_attention_kernel, rmsnorm_kernel, softmax_kernel)

    a, b = rand(512, 1024), rand(512, 1024)
    lhsT, rhs = rand(512, 256), rand(512, 1024)
    x, w = rand(640, 256), rand(256)
    s = rand(640, 96)
    q, k, v = rand(384, 64), rand(512, 64), rand(512, 64)
    cases = [(tensor_add_kernel, (4, 2), (a, b)), (matmul_tiled_kernel, (1,), (lhsT, rhs)),
             (rmsnorm_kernel, (1,), (x, w, 1e-5)), (scale_rows_kernel, (5,), (s,)),
             (softmax_kernel, (5,), (s,)), (flash_attention_kernel, (3,), (q, k, v))]
    whole = [kern[grid](*args) for kern, grid, args in cases]
    monkeypatch.setattr(runner, "BATCH_BYTES_BUDGET", 300_000)  # a few tiles at a time
    with caplog.at_level(logging.DEBUG, logger="emulator.kernel_exec"):
        for (kern, grid, args), ref in zip(cases, whole):
            kern._cache.clear()
            np.testing.assert_allclose(kern[grid](*args), ref, rtol=1e-4, atol=1e-4,
                                       err_msg=kern.func.__name__)
    assert "runs in chunks of" in caplog.text
    assert "grid [4, 2] runs in chunks of" in caplog.text


def test_in_place_updates_of_own_tiles_stay_vectorised(caplog):
    from neuron_customcall.nki import language as nl

    @nki.jit
    def bump(x):
        rows = nl.program_id(0) * 128 + nl.arange(128)[:, None]
        for j in nl.affine_range(x.shape[1] // 64):
            cols = j * 64 + nl.arange(64)[None, :]
            nl.store(x[rows, cols], value=nl.add(nl.load(x[rows, cols]), 1.0))

    x = rand(256, 256)
    ref = x + 1
    with caplog.at_level(logging.DEBUG, logger="emulator.kernel_exec"):
        bump[2](x)
    np.testing.assert_array_equal(x, ref)
    assert "Python loop" not in caplog.text and "one program at a time" not in caplog.text
