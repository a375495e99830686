"""``nisa.rand_get_state`` / ``rand_set_state`` (issue 13): setting a saved state reproduces the
random numbers that followed the save, for every random instruction (``rng``, ``rand2``,
``dropout``) and per program of a grid; the state's layout and the argument rules the
reference states."""
from __future__ import annotations

import numpy as np
import pytest

from neuron_customcall.nki.isa import beta2 as nisa  # the SDK's `nki.isa` (beta 2)
from neuron_customcall import nki
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import HardwareRuleError

X = np.zeros((1, 1), np.float32)


@nki.jit
def replay(x, engine_words):
    """Draw, save the state, draw three tiles (rng, rand2, dropout), restore, draw them again."""
    out = nl.ndarray((6, 128, 16), nl.float32, buffer=nl.shared_hbm)
    state = nl.ndarray((128, engine_words), nl.uint32, buffer=nl.sbuf)
    engine = nisa.engine.gpsimd if engine_words == 6 else nisa.engine.vector
    first = nl.ndarray((128, 16), nl.uint32, buffer=nl.sbuf)
    nisa.rng(first)  # before the save: not replayed
    nisa.rand_get_state(state, engine=engine)
    ones = nl.ndarray((128, 16), nl.float32, buffer=nl.sbuf)
    nisa.memset(ones, value=1.0)
    for rep in range(2):
        bits = nl.ndarray((128, 16), nl.uint32, buffer=nl.sbuf)
        nisa.rng(bits)
        as_f = nl.ndarray((128, 16), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=as_f, src=bits)
        uni = nl.ndarray((128, 16), nl.float32, buffer=nl.sbuf)
        nisa.rand2(uni, -2.0, 3.0)
        drop = nl.ndarray((128, 16), nl.float32, buffer=nl.sbuf)
        nisa.dropout(drop, ones, 0.5)
        nisa.dma_copy(dst=out[3 * rep], src=as_f)
        nisa.dma_copy(dst=out[3 * rep + 1], src=uni)
        nisa.dma_copy(dst=out[3 * rep + 2], src=drop)
        if rep == 0:
            nisa.rand_set_state(state, engine=engine)
    return out


@pytest.mark.parametrize("words", [6, 24])
def test_setting_a_saved_state_replays_the_draws_that_followed_it(words):
    out = replay(X, words)
    np.testing.assert_array_equal(out[0:3], out[3:6])
    assert len(np.unique(out[0])) > 1000  # random bits, not a constant
    assert ((out[1] >= -2) & (out[1] < 3)).all() and set(np.unique(out[2])) == {0.0, 1.0}
    assert not np.array_equal(out[0], out[1])


@nki.jit
def saved(x):
    """The state tile itself, and a draw after restoring it twice."""
    st_out = nl.ndarray((128, 6), nl.uint32, buffer=nl.shared_hbm)
    draws = nl.ndarray((2, 4, 8), nl.uint32, buffer=nl.shared_hbm)
    st = nl.ndarray((128, 6), nl.uint32, buffer=nl.sbuf)
    nisa.rand_get_state(st)
    nisa.dma_copy(dst=st_out, src=st)
    for rep in range(2):
        nisa.rand_set_state(st)
        nisa.memset(st, value=0)  # the engine keeps its copy: later writes change nothing
        d = nl.ndarray((4, 8), nl.uint32, buffer=nl.sbuf)
        nisa.rng(d)
        nisa.dma_copy(dst=draws[rep], src=d)
        nisa.dma_copy(dst=st, src=st_out)
    return st_out, draws


def test_the_state_layout_and_that_the_engine_keeps_its_copy():
    st, draws = saved(X)
    assert (st[:, 1:] == 0).all() and (st[:, 0] == st[0, 0]).all()
    np.testing.assert_array_equal(draws[0], draws[1])


@nki.jit
def per_program(x):
    out = nl.ndarray((4, 2, 8, 8), nl.uint32, buffer=nl.shared_hbm)
    p = nl.program_id(0)
    st = nl.ndarray((8, 6), nl.uint32, buffer=nl.sbuf)
    nisa.rand_get_state(st)
    a = nl.ndarray((8, 8), nl.uint32, buffer=nl.sbuf)
    nisa.rng(a)
    nisa.rand_set_state(st)
    b = nl.ndarray((8, 8), nl.uint32, buffer=nl.sbuf)
    nisa.rng(b)
    nisa.dma_copy(dst=out[p, 0], src=a)
    nisa.dma_copy(dst=out[p, 1], src=b)
    return out


def test_each_program_replays_its_own_stream():
    out = per_program[4](X)
    np.testing.assert_array_equal(out[:, 0], out[:, 1])
    assert len({out[i, 0].tobytes() for i in range(4)}) == 4


@pytest.mark.parametrize("shape,dtype,engine,message", [
    ((128, 5), nl.uint32, None, r"6 uint32 words per partition on gpsimd"),
    ((128, 6), nl.int32, None, r"uint32 tile, got int32"),
    ((128, 6), nl.uint32, "vector", r"24 uint32 words per partition on vector"),
    ((128, 6), nl.uint32, "tensor", r"runs on gpsimd or vector, not tensor"),
])
def test_state_arguments_are_checked(shape, dtype, engine, message):
    @nki.jit
    def bad(x):
        st = nl.ndarray(shape, dtype, buffer=nl.sbuf)
        eng = getattr(nisa.engine, engine) if engine else nisa.engine.gpsimd
        nisa.rand_get_state(st, engine=eng)
        return x

    with pytest.raises(HardwareRuleError, match=message):
        bad(X)

    @nki.jit
    def bad_psum(x):
        st = nl.ndarray((128, 6), nl.uint32, buffer=nl.psum)
        nisa.rand_set_state(st)
        return x

    with pytest.raises(HardwareRuleError, match=r"src_seeds on gpsimd is in sbuf, got psum"):
        bad_psum(X)


@nki.jit
def draws_in_loops(x, seed_in_loop):
    """Three draws in a data-dependent loop, three in a static loop re-seeded with the same value
    in every iteration (or seeded once before it)."""
    out = nl.ndarray((2, 3, 4, 8), nl.uint32, buffer=nl.shared_hbm)
    n = nisa.register_alloc(3)
    for i in nl.dynamic_range(n):
        d = nl.ndarray((4, 8), nl.uint32, buffer=nl.sbuf)
        nisa.rng(d)
        nisa.dma_copy(dst=out[0].ap([[8, 4], [1, 8]], scalar_offset=i, indirect_dim=1), src=d)
    seed = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.memset(seed, value=7)
    if not seed_in_loop:
        nisa.set_rng_seed(seed)
    for k in nl.affine_range(3):
        if seed_in_loop:
            nisa.set_rng_seed(seed)
        d = nl.ndarray((4, 8), nl.uint32, buffer=nl.sbuf)
        nisa.rng(d)
        nisa.dma_copy(dst=out[1, k], src=d)
    return out


def test_data_dependent_iterations_draw_anew_and_reseeding_in_a_loop_repeats():
    out = draws_in_loops(X, True)
    assert len({out[0, i].tobytes() for i in range(3)}) == 3
    np.testing.assert_array_equal(out[1, 0], out[1, 1])
    np.testing.assert_array_equal(out[1, 0], out[1, 2])
    once = draws_in_loops(X, False)
    assert len({once[1, i].tobytes() for i in range(3)}) == 3
