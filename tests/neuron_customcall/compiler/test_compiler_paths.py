"""Which emulator path the compiler picks for common framework patterns (the fast ones), checked
on the program, with the results still checked against XLA:CPU."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from tests.neuron_customcall.compiler.ours import assert_close, compile_proto, jax_proto, rand, run_jax


def _ops(exe, op):
    return [i for c in exe.artifact.program.computations for i in c.instructions if i.op == op]


def test_jax_float_sort_uses_a_key_and_argsort():
    x = np.array([3.0, np.nan, -0.0, 0.0, -np.inf, 1.0, 2.0] * 50, np.float32)
    exe = compile_proto(jax_proto(jnp.sort, x))
    (s,) = _ops(exe, "sort")
    assert s.attrs["fast"] == "lt" and s.attrs["key"] >= 0
    assert_close(*run_jax(jnp.sort, x))


def test_multi_key_sort_falls_back_to_the_sorting_network():
    a, b = rand(40, dtype=np.int32, low=0, high=3), rand(40, dtype=np.int32, low=0, high=5, seed=1)
    f = lambda a, b: lax.sort((a, b), num_keys=2)  # noqa: E731
    (s,) = _ops(compile_proto(jax_proto(f, a, b)), "sort")
    assert s.attrs["fast"] == "" and s.attrs["key"] == -1
    assert_close(*run_jax(f, a, b))


def test_sum_and_max_use_ufunc_reducers_and_cumsum_accumulates():
    f = lambda x: (x.sum(0), x.max(1), jnp.cumsum(x, 1))  # noqa: E731
    exe = compile_proto(jax_proto(f, rand(5, 7)))
    assert {i.attrs["reducer"] for i in _ops(exe, "reduce")} == {"add", "maximum"}
    assert all(i.attrs["reducer"] == "add" for i in _ops(exe, "reduce_window"))
    assert_close(*run_jax(f, rand(5, 7)))
