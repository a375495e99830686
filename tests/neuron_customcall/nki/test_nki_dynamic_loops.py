"""Data-dependent loops (issue 13): ``nl.while_loop``, ``while reg:`` and ``nl.dynamic_range`` /
``nl.fori_loop`` with register bounds, each against NumPy (the reference's "roughly equivalent
Python"), per program of a grid, nested with static loops, through the serialised IR and JAX, and
their errors (the iteration limit, registers as other conditions, bad operands)."""
from __future__ import annotations

import copy

import numpy as np
import pytest

from neuron_customcall.nki.isa import beta2 as nisa  # the SDK's `nki.isa` (beta 2)
from emulator.kernel_exec.errors import KernelRuntimeError
from emulator.kernel_ir import (DYNAMIC_LOOP, WHILE_LOOP, Access, Affine, Const, KernelIR, Loop,
                                KernelIRValidationError, TensorDecl, format_kernel, from_bytes,
                                to_bytes, validate, walk_loops)
from emulator.kernel_exec.runner import run_kernel
from neuron_customcall import nki
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import KernelTraceError


def _sb(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)


@nki.jit
def countdown(data, count):
    """The reference's while_loop example: add ``data`` to an accumulator ``count`` times."""
    out = nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)
    val = _sb((1, 1))
    nisa.dma_copy(dst=val, src=data)
    acc = nl.zeros((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    count_sb = _sb((1, 1), nl.int32)
    nisa.dma_copy(dst=count_sb, src=count)
    one_sb = _sb((1, 1), nl.int32)
    nisa.memset(dst=one_sb, value=1)
    reg = nisa.register_alloc()
    nisa.register_load(reg, count_sb)

    def body(r):
        nisa.tensor_tensor(dst=acc, data1=acc, data2=val, op=nl.add)
        nisa.tensor_tensor(dst=count_sb, data1=count_sb, data2=one_sb, op=nl.subtract)
        nisa.register_load(r, count_sb)
        return r

    nl.while_loop(reg, body)
    nisa.dma_copy(dst=out, src=acc)
    return out


@pytest.mark.parametrize("n", [0, 1, 7, 40])
def test_while_loop_runs_while_its_register_is_nonzero(n):
    got = countdown(np.array([[2.5]], np.float32), np.array([[n]], np.int32))
    want = np.float32(0)
    for _ in range(n):  # r = init; while r != 0: r = body(r)
        want = np.float32(want + np.float32(2.5))
    assert got.tolist() == [[float(want)]]


@nki.jit
def collatz_steps(start):
    """``while reg:`` (the dynamic-loops guide): count the Collatz steps of each partition's
    start value; the condition is "some partition has not reached 1" (a partition reduction)."""
    out = nl.ndarray((8, 1), nl.int32, buffer=nl.shared_hbm)
    x = _sb((8, 1))
    nisa.dma_copy(dst=x, src=start)
    steps = nl.zeros((8, 1), dtype=nl.float32, buffer=nl.sbuf)
    active = _sb((8, 1))
    flag = _sb((1, 1))
    reg = nisa.register_alloc(1)
    while reg:
        nisa.tensor_scalar(dst=active, data=x, op0=nl.greater, operand0=1.0)
        odd = _sb((8, 1))
        nisa.tensor_scalar(dst=odd, data=x, op0=nl.mod, operand0=2.0)
        up = _sb((8, 1))
        nisa.tensor_scalar(dst=up, data=x, op0=nl.multiply, operand0=3.0, op1=nl.add,
                           operand1=1.0)
        down = _sb((8, 1))
        nisa.tensor_scalar(dst=down, data=x, op0=nl.multiply, operand0=0.5)
        nxt = _sb((8, 1))
        nisa.tensor_tensor(dst=nxt, data1=odd, data2=up, op=nl.multiply)
        rest = _sb((8, 1))
        nisa.tensor_scalar(dst=rest, data=odd, op0=nl.multiply, operand0=-1.0, op1=nl.add,
                           operand1=1.0)
        nisa.tensor_tensor(dst=rest, data1=rest, data2=down, op=nl.multiply)
        nisa.tensor_tensor(dst=nxt, data1=nxt, data2=rest, op=nl.add)
        # partitions already at 1 stay there and stop counting
        keep = _sb((8, 1))
        nisa.tensor_scalar(dst=keep, data=active, op0=nl.multiply, operand0=-1.0, op1=nl.add,
                           operand1=1.0)
        nisa.tensor_tensor(dst=nxt, data1=nxt, data2=active, op=nl.multiply)
        nisa.tensor_tensor(dst=x, data1=nxt, data2=keep, op=nl.add)
        nisa.tensor_tensor(dst=steps, data1=steps, data2=active, op=nl.add)
        nisa.tensor_partition_reduce(dst=flag, op=nl.add, data=active)
        nisa.register_load(reg, flag)
    nisa.dma_copy(dst=out, src=steps)
    return out


def _collatz(v: int) -> int:
    n = 0
    while v != 1:
        v = 3 * v + 1 if v % 2 else v // 2
        n += 1
    return n


def test_while_register_form_traces_the_body_once_and_runs_it_per_iteration():
    start = np.array([[1], [2], [3], [6], [7], [9], [27], [5]], np.float32)
    got = collatz_steps(start)
    assert got.ravel().tolist() == [_collatz(int(v)) for v in start.ravel()]
    assert [lp.kind for lp in walk_loops(_traced(collatz_steps, start).body)] == [WHILE_LOOP]


@nki.jit
def index_sum(bounds):
    """The loop's index register: the sum of ``range(start, stop, step)``; writing the index in
    the body does not change the iteration."""
    seen = nl.ndarray((1, 1), nl.int32, buffer=nl.shared_hbm)
    b = _sb((1, 2), nl.int32)
    nisa.dma_copy(dst=b, src=bounds)
    lo, hi = nisa.register_alloc(), nisa.register_alloc()
    nisa.register_load(lo, b[0:1, 0:1])
    nisa.register_load(hi, b[0:1, 1:2])
    total = nl.zeros((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    i_sb = _sb((1, 1), nl.int32)
    for i in nl.dynamic_range(lo, hi, 3):
        nisa.register_store(i_sb, i)
        nisa.tensor_tensor(dst=total, data1=total, data2=i_sb, op=nl.add)
        nisa.register_move(i, 1000)  # no effect on the loop
    nisa.dma_copy(dst=seen, src=total)
    return seen


@pytest.mark.parametrize("lo,hi", [(0, 10), (2, 3), (5, 5), (7, 2), (-4, 11)])
def test_dynamic_range_with_register_bounds(lo, hi):
    got = index_sum(np.array([[lo, hi]], np.int32))
    assert got.tolist() == [[sum(range(lo, hi, 3))]]


@nki.jit
def fori_prefix(data, n):
    """The reference's fori_loop example shape: ``out[0, i] = data[0, i]`` for i < n (HBM to
    HBM through a one-element tile, addressed by the loop's register), the rest zero."""
    out = nl.ndarray((1, 16), nl.float32, buffer=nl.shared_hbm)
    ub_sb = _sb((1, 1), nl.int32)
    nisa.dma_copy(dst=ub_sb, src=n)
    ub_reg = nisa.register_alloc()
    nisa.register_load(ub_reg, ub_sb)
    zeros = nl.zeros((1, 16), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=out, src=zeros)
    temp = _sb((1, 1))
    acc = nl.zeros((1, 1), dtype=nl.float32, buffer=nl.sbuf)

    def body(i):
        t = _sb((1, 1), nl.int32)
        nisa.register_store(t, i)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)

    nl.fori_loop(0, ub_reg, body)
    nisa.dma_copy(dst=out[0:1, 0:1], src=acc)
    return out


@pytest.mark.parametrize("n", [0, 1, 9])
def test_fori_loop_with_a_register_bound_passes_the_index_register(n):
    got = fori_prefix(np.zeros((1, 16), np.float32), np.array([[n]], np.int32))
    want = np.zeros((1, 16), np.float32)
    want[0, 0] = sum(range(n))
    np.testing.assert_array_equal(got, want)


@nki.jit
def per_program(x, counts):
    """Each program of the grid repeats ``x * 2`` its own number of times (its count)."""
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    p = nl.program_id(0)
    t = nl.load(x[p * 128 + nl.arange(128)[:, None], nl.arange(32)[None, :]])
    c = _sb((1, 1), nl.int32)
    nisa.dma_copy(dst=c, src=counts[p:p + 1, 0:1])
    reg = nisa.register_alloc()
    nisa.register_load(reg, c)
    for _ in nl.dynamic_range(reg):
        for k in nl.affine_range(4):  # a static loop inside: still whole tiles
            nisa.tensor_scalar(dst=t[:, k * 8:(k + 1) * 8], data=t[:, k * 8:(k + 1) * 8],
                               op0=nl.multiply, operand0=2.0)
    nl.store(out[p * 128 + nl.arange(128)[:, None], nl.arange(32)[None, :]], t)
    return out


def test_each_program_runs_its_own_trip_count():
    x = np.random.default_rng(1).random((512, 32)).astype(np.float32)
    counts = np.array([[3], [0], [1], [5]], np.int32)
    got = per_program[4](x, counts)
    want = x * np.repeat(2.0 ** counts.ravel(), 128)[:, None]
    np.testing.assert_array_equal(got, want.astype(np.float32))


@nki.jit
def in_static_loop(x, counts):
    """A data-dependent loop inside a static one: iteration k doubles row block k counts[k]
    times."""
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    c = _sb((1, 4), nl.int32)
    nisa.dma_copy(dst=c, src=counts)
    for k in nl.affine_range(4):
        t = nl.load(x[k * 32 + nl.arange(32)[:, None], nl.arange(16)[None, :]])
        reg = nisa.register_alloc()
        nisa.register_load(reg, c[0:1, k:k + 1])
        while reg:
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
            nisa.tensor_scalar(dst=c[0:1, k:k + 1], data=c[0:1, k:k + 1], op0=nl.subtract,
                               operand0=1)
            nisa.register_load(reg, c[0:1, k:k + 1])
        nl.store(out[k * 32 + nl.arange(32)[:, None], nl.arange(16)[None, :]], t)
    return out


def test_data_dependent_loop_inside_a_static_loop():
    x = np.random.default_rng(2).random((128, 16)).astype(np.float32)
    counts = np.array([[2, 0, 4, 1]], np.int32)
    want = x * np.repeat(2.0 ** counts.ravel(), 32)[:, None]
    np.testing.assert_array_equal(in_static_loop(x, counts), want.astype(np.float32))


def _traced(kernel, *args) -> KernelIR:
    return nki.trace_kernel(kernel, list(args)).ir


def test_serialised_ir_keeps_the_loops_and_runs_the_same():
    data, count = np.array([[1.5]], np.float32), np.array([[6]], np.int32)
    ir = _traced(countdown, data, count)
    kinds = [lp.kind for lp in walk_loops(ir.body)]
    assert kinds == [WHILE_LOOP]
    back = from_bytes(to_bytes(ir))
    validate(back)
    assert [lp.operands for lp in walk_loops(back.body)] == [lp.operands for lp in
                                                             walk_loops(ir.body)]
    assert run_kernel(back, [data, count])[0].tolist() == [[9.0]]
    text = format_kernel(back)
    assert "while t" in text
    ir2 = _traced(index_sum, np.array([[0, 4]], np.int32))
    (lp,) = [lp for lp in walk_loops(ir2.body)]
    assert lp.kind == DYNAMIC_LOOP and lp.step == 3 and lp.extent == 0
    back2 = from_bytes(to_bytes(ir2))
    assert "dynamic_range(" in format_kernel(back2) and ", 3):" in format_kernel(back2)
    assert run_kernel(back2, [np.array([[1, 11]], np.int32)])[0].tolist() == [[1 + 4 + 7 + 10]]


def _ir_with_loop(loop: Loop) -> KernelIR:
    tensors = {"r": TensorDecl("r", (1, 1), "int32", "sbuf"),
               "f": TensorDecl("f", (1, 1), "float32", "sbuf")}
    return KernelIR("k", (1,), tensors, (), (), [loop])


@pytest.mark.parametrize("loop,message", [
    (Loop("l1", 3, WHILE_LOOP, [], None, (Access("r", (1, 1), (Affine(), Affine())),)),
     "extent 0"),
    (Loop("l1", 0, WHILE_LOOP, [], None, ()), "takes 1 operands"),
    (Loop("l1", 0, WHILE_LOOP, [], None, (Access("f", (1, 1), (Affine(), Affine())),)),
     "must be a register"),
    (Loop("l1", 0, DYNAMIC_LOOP, [], None, (Const(0), Const(0), Const(4))), "written by the loop"),
    (Loop("l1", 0, DYNAMIC_LOOP, [], None, (Access("r", (1, 1), (Affine(), Affine())),
                                            Const(0), Const(4)), step=0), "step must be"),
    (Loop("l1", 0, "forever", [], None), "unknown loop kind"),
    (Loop("l1", 2, "affine", [], None, (Const(1),)), "no operands"),
])
def test_validation_names_what_is_wrong_with_a_loop(loop, message):
    with pytest.raises(KernelIRValidationError, match=message):
        validate(_ir_with_loop(loop))


@nki.jit
def forever(x):
    out = nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)
    reg = nisa.register_alloc(1)
    t = _sb((1, 1))
    nisa.dma_copy(dst=t, src=x)
    while reg:
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_a_loop_past_the_iteration_limit_stops_naming_kernel_line_and_setting(monkeypatch):
    monkeypatch.setenv("NEURON_EMULATOR_MAX_KERNEL_LOOP_ITERATIONS", "50")
    with pytest.raises(KernelRuntimeError, match=r"kernel 'forever'.*test_nki_dynamic_loops\.py:"
                       r"\d+.*loop iteration limit.*exceeds 50 iterations.*"
                       r"NEURON_EMULATOR_MAX_KERNEL_LOOP_ITERATIONS"):
        forever(np.zeros((1, 1), np.float32))
    monkeypatch.setenv("NEURON_EMULATOR_MAX_KERNEL_LOOP_ITERATIONS", "4")
    with pytest.raises(KernelRuntimeError, match=r"dynamic_range\(0, 10, 3\) \(4 iterations\)|"
                       r"exceeds 4"):
        index_sum(np.array([[0, 30]], np.int32))
    assert index_sum(np.array([[0, 10]], np.int32)).tolist() == [[0 + 3 + 6 + 9]]


def test_a_register_as_another_condition_is_a_trace_error():
    @nki.jit
    def with_if(x):
        reg = nisa.register_alloc(1)
        if reg:
            nisa.register_move(reg, 0)
        return x

    with pytest.raises(KernelTraceError, match=r"data-dependent control flow.*only `while reg:`"):
        with_if(np.zeros((1, 1), np.float32))

    @nki.jit
    def with_break(x):
        reg = nisa.register_alloc(1)
        while reg:
            break
        return x

    with pytest.raises(KernelTraceError, match=r"data-dependent control flow"):
        with_break(np.zeros((1, 1), np.float32))

    @nki.jit
    def as_int(x):
        reg = nisa.register_alloc(3)
        for _ in range(reg):
            pass
        return x

    with pytest.raises(KernelTraceError, match=r"data-dependent control flow.*not.*Python int|"
                       r"only known when the kernel runs"):
        as_int(np.zeros((1, 1), np.float32))


def test_loop_operand_errors_are_named():
    @nki.jit
    def reg_step(x):
        reg = nisa.register_alloc(3)
        for _ in nl.dynamic_range(0, reg, reg):
            pass
        return x

    with pytest.raises(KernelTraceError, match=r"step must be a positive int known while "
                       "tracing"):
        reg_step(np.zeros((1, 1), np.float32))

    @nki.jit
    def bad_init(x):
        nl.while_loop(1, lambda r: r)
        return x

    with pytest.raises(KernelTraceError, match=r"while_loop: init must be a VirtualRegister"):
        bad_init(np.zeros((1, 1), np.float32))

    @nki.jit
    def bad_return(x):
        nl.while_loop(nisa.register_alloc(0), lambda r: None)
        return x

    with pytest.raises(KernelTraceError, match=r"body_fun returns the next condition register"):
        bad_return(np.zeros((1, 1), np.float32))


def test_through_jax():
    jax = pytest.importorskip("jax")
    import neuron_customcall.jax as ncj

    data = np.array([[0.75]], np.float32)
    count = np.array([[12]], np.int32)
    got = ncj.jit(lambda d, c: countdown(d, c) * 2.0)(data, count)
    np.testing.assert_allclose(np.asarray(got), [[18.0]])
    assert jax is not None


def test_the_cost_model_counts_a_data_dependent_body_once():
    from emulator.cost.kernel_ir import kernel_cost

    ir = _traced(countdown, np.array([[1.0]], np.float32), np.array([[3]], np.int32))
    with_body = kernel_cost(ir)["vector"]
    ir = copy.deepcopy(ir)
    (loop,) = walk_loops(ir.body)
    loop.body.clear()
    assert with_body > kernel_cost(ir)["vector"]  # the body's tensor_tensor ops count
