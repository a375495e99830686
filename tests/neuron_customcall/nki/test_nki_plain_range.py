"""A plain Python ``range`` over kernel work traces as one ``sequential_range`` loop with the
results of unrolling it; a ``range`` whose body needs concrete ints still unrolls."""

from __future__ import annotations

import logging

import numpy as np

from emulator.kernel_ir import walk_instructions, walk_loops
from neuron_customcall import nki
from neuron_customcall.nki import language as nl

rng = np.random.default_rng(7)


def _loops(kernel, *args):
    ir = kernel.trace(list(args)).ir
    return list(walk_loops(ir.body)), len(list(walk_instructions(ir.body)))


@nki.jit
def decay_plain(x):
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 64), nl.float32)
    first = acc
    for i in range(8):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        acc = acc * 0.5 + t  # rebinds the carried name: each iteration reads the previous one
    nl.store(out, acc + first)  # 'first' is still the zeros, as in unrolled code
    return out


@nki.jit
def decay_static(x):
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 64), nl.float32)
    first = acc
    for i in nl.static_range(8):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        acc = acc * 0.5 + t
    nl.store(out, acc + first)
    return out


def test_rebound_carried_tile_is_one_loop_with_the_unrolled_result():
    x = rng.random((1024, 64), dtype=np.float32)
    loops, n = _loops(decay_plain, x)
    assert [lp.kind for lp in loops] == ["sequential"] and loops[0].extent == 8
    assert n < 12 < _loops(decay_static, x)[1]
    ref = np.zeros((128, 64), np.float32)
    for i in range(8):
        ref = ref * np.float32(0.5) + x[i * 128:(i + 1) * 128]
    got = decay_plain(x)
    np.testing.assert_array_equal(got, decay_static(x))
    np.testing.assert_array_equal(got, ref)


@nki.jit
def long_sum(x):
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 64), nl.float32)
    for i in range(1000):
        acc += nl.load(x[(i % 8) * 128 + nl.arange(128)[:, None], nl.arange(64)[None, :]])
    nl.store(out, acc)
    return out


def test_thousand_iterations_make_one_loop():
    x = rng.random((1024, 64), dtype=np.float32)
    loops, n = _loops(long_sum, x)
    assert len(loops) == 1 and loops[0].extent == 1000 and n < 6
    ref = np.zeros((128, 64), np.float32)
    for i in range(1000):
        ref += x[(i % 8) * 128:(i % 8 + 1) * 128]
    np.testing.assert_allclose(long_sum(x), ref, rtol=1e-5)


@nki.jit
def nested(x):
    """Outer iterations depend on each other through ``h``; the inner loop reads the outer
    variable and carries ``row`` in place."""
    out = nl.ndarray((128, 32), dtype=x.dtype, buffer=nl.shared_hbm)
    h = nl.zeros((128, 32), nl.float32)
    for i in range(4):
        row = nl.zeros((128, 32), nl.float32)
        for j in range(3):
            row += nl.load(x[:, i * 3 + j, :])
        h = nl.maximum(h * 0.9, row)
    nl.store(out, h)
    return out


def test_nested_loops_with_dependencies():
    x = rng.standard_normal((128, 12, 32), dtype=np.float32)
    loops, _ = _loops(nested, x)
    assert [lp.extent for lp in loops] == [4, 3]
    h = np.zeros((128, 32), np.float32)
    for i in range(4):
        h = np.maximum(h * np.float32(0.9), x[:, i * 3:i * 3 + 3, :].sum(axis=1))
    np.testing.assert_allclose(nested(x), h, rtol=1e-6)


@nki.jit
def needs_ints(x):
    o1 = nl.ndarray((128, 16), dtype=x.dtype, buffer=nl.shared_hbm)
    o2 = nl.ndarray((128, 16), dtype=x.dtype, buffer=nl.shared_hbm)
    parts = []
    for i in range(4):  # builds a Python list: unrolled (seen in the source)
        parts.append(nl.load(x[:, i * 16:(i + 1) * 16]))
    acc = parts[0]
    for i in range(4):  # Python 'if' on the variable: unrolled (found while tracing)
        if i > 0:
            acc = acc + parts[i]
    for i in range(2):  # indexes a tuple of tensors: unrolled
        nl.store((o1, o2)[i], value=acc * (i + 1))
    return o1, o2


def test_bodies_that_need_concrete_ints_unroll(caplog):
    x = rng.random((128, 64), dtype=np.float32)
    with caplog.at_level(logging.DEBUG, logger="neuron_customcall.nki.loops"):
        loops, _ = _loops(needs_ints, x)
    assert loops == []
    text = caplog.text
    assert "calls .append()" in text and "needs concrete values" in text
    a, b = needs_ints(x)
    ref = x.reshape(128, 4, 16).sum(axis=1)
    np.testing.assert_allclose(a, ref, rtol=1e-6)
    np.testing.assert_allclose(b, 2 * ref, rtol=1e-6)


@nki.jit
def shapes_from_the_variable(x):
    out = nl.ndarray((128, 10), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in range(1, 5):
        t = nl.ndarray((128, i), nl.float32)  # a shape needs a concrete int
        t[...] = nl.load(x[:, 0:i])
        nl.store(out[:, i * (i - 1) // 2:i * (i + 1) // 2], value=t)
    return out


def test_shapes_from_the_variable_unroll():
    x = rng.random((128, 8), dtype=np.float32)
    ref = np.concatenate([x[:, :i] for i in range(1, 5)], axis=1)
    np.testing.assert_array_equal(shapes_from_the_variable(x), ref)


@nki.jit
def index_read_after_loop(x):
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in range(4):
        ix = i * 128 + nl.arange(128)[:, None]
    nl.store(out, nl.load(x[ix, nl.arange(64)[None, :]]))  # the last iteration's index
    return out


def test_index_used_after_the_loop_unrolls():
    x = rng.random((512, 64), dtype=np.float32)
    assert _loops(index_read_after_loop, x)[0] == []
    np.testing.assert_array_equal(index_read_after_loop(x), x[384:])


def test_closures_and_python_values_carried():
    scale = 3.0

    @nki.jit
    def k(x):
        out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        offset = 0
        for _ in range(4):  # carries a Python int: unrolled
            nl.store(out[:, offset:offset + 16], value=nl.load(x[:, offset:offset + 16]) * scale)
            offset += 16
        return out

    x = rng.random((128, 64), dtype=np.float32)
    assert _loops(k, x)[0] == []
    np.testing.assert_allclose(k(x), x * 3, rtol=1e-6)

    @nki.jit
    def k2(x):
        out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        for i in range(4):  # a closure variable in the body: still one loop
            cols = nl.arange(16)[None, :] + i * 16
            nl.store(out[nl.arange(128)[:, None], cols],
                     value=nl.load(x[nl.arange(128)[:, None], cols]) * scale)
        return out

    assert len(_loops(k2, x)[0]) == 1
    np.testing.assert_allclose(k2(x), x * 3, rtol=1e-6)


def test_errors_in_the_body_name_the_users_line():
    import inspect

    import pytest

    from neuron_customcall.nki import KernelTraceError

    @nki.jit
    def bad(x):
        out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        for i in range(4):
            t = nl.load(x[i * 128:(i + 1) * 128, :])
            nl.store(out, value=nl.ndarray((256, 64), nl.float32) + t)  # HERE
        return out

    lines, start = inspect.getsourcelines(bad.func)
    line = start + next(k for k, ln in enumerate(lines) if "# HERE" in ln)
    with pytest.raises(KernelTraceError) as e:
        bad(rng.random((512, 64), dtype=np.float32))
    assert f"{__file__}:{line}" in str(e.value) and "partition dimension" in str(e.value)


def test_static_python_conditions_stay_one_loop():
    @nki.jit
    def k(x, scale_first):
        out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 64), nl.float32)
        for i in range(6):
            t = nl.load(x[i * 128:(i + 1) * 128, :])
            if scale_first:  # a Python value, the same in every iteration
                t = t * 2.0
            acc = nl.maximum(acc, t)
        nl.store(out, acc)
        return out

    x = rng.standard_normal((768, 64), dtype=np.float32)
    assert len(_loops(k, x, True)[0]) == 1
    np.testing.assert_array_equal(k(x, True), np.maximum(0, 2 * x.reshape(6, 128, 64)).max(0))
    np.testing.assert_array_equal(k(x, False), np.maximum(0, x.reshape(6, 128, 64)).max(0))


@nki.jit
def matmul_tile_lists(lhsT, rhs):
    """Beta 2's tutorial style: tiles appended to Python lists inside nl.affine_range loops,
    then picked by another loop's variable (beta 2 defines affine_range as range, unrolled)."""
    from neuron_customcall.nki.isa import beta2 as nisa
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    lhs_tiles, rhs_tiles = [], []
    for k in nl.affine_range(K // 32):
        a = nl.ndarray((32, M), dtype=lhsT.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=lhsT[k * 32:(k + 1) * 32, :])
        lhs_tiles.append(a)
        b = nl.ndarray((32, N), dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=b, src=rhs[k * 32:(k + 1) * 32, :])
        rhs_tiles.append(b)
    acc = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(K // 32):
        nisa.nc_matmul(dst=acc, stationary=lhs_tiles[k], moving=rhs_tiles[k])
    res = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_affine_range_with_lists_of_tiles_unrolls():
    lhsT = rng.standard_normal((128, 16)).astype(np.float32)
    rhs = rng.standard_normal((128, 24)).astype(np.float32)
    np.testing.assert_allclose(matmul_tile_lists(lhsT, rhs), lhsT.T @ rhs, rtol=1e-4, atol=1e-4)
    loops, _ = _loops(matmul_tile_lists, lhsT, rhs)
    assert loops == []  # both loops unrolled: one appends, the other indexes a list by k


@nki.jit
def affine_with_instruction_add(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.add(t, 1.0))
    for j in range(2):  # nl.add is an instruction, not set.add: no Python side effect
        t = nl.load(out[j * 128:(j + 1) * 128, :])
        nl.store(out[j * 128:(j + 1) * 128, :], value=nl.add(t, 1.0))
    return out


def test_loops_calling_nl_add_stay_loops_and_affine_stays_affine():
    x = rng.standard_normal((512, 8)).astype(np.float32)
    want = x + 1
    want[:256] += 1
    np.testing.assert_allclose(affine_with_instruction_add(x), want, rtol=1e-6)
    loops, _ = _loops(affine_with_instruction_add, x)
    assert [(lp.extent, lp.kind) for lp in loops] == [(4, "affine"), (2, "sequential")]
