"""Simplifications while lowering: an element of a tuple built in the same computation is that
operand (no get-tuple-element), and effect-free instructions nobody reads are dropped. Results
checked against XLA:CPU."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import hlo
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable
from tests.neuron_customcall.compiler.ours import assert_close, compile_proto, jax_proto, rand, run_jax


def _tuple_reads(comp):
    """get-tuple-element instructions reading a tuple built earlier in the same computation."""
    built = set()
    reads = 0
    for inst in comp.instructions:
        if inst.op == "get-tuple-element" and inst.ins[0] in built:
            reads += 1
        built.discard(inst.out)
        if inst.op == "tuple":
            built.add(inst.out)
    return reads


def test_loop_body_reads_no_element_of_its_own_tuples():
    def f(x):
        return jax.lax.fori_loop(0, 7, lambda i, v: (jnp.tanh(v[0] * 0.9 + 0.1 * i), v[1] + v[0].sum()), (x, x.sum()))

    x = rand(8)
    exe = compile_proto(jax_proto(f, x))
    comps = exe.artifact.program.computations
    assert all(_tuple_reads(c) == 0 for c in comps)
    assert sum(i.op == "tuple" for c in comps for i in c.instructions) <= 3  # entry state, body result(s)
    assert_close(*run_jax(f, x))


TEXT = """
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  t = (f32[4], f32[4]) tuple(x, y)
  a = f32[4] get-tuple-element(t), index=1
  b = f32[4] get-tuple-element(t), index=0
  unused = f32[4] exponential(a)
  also_unused = f32[4] broadcast(b), dimensions={0}
  s = f32[4] subtract(a, b)
  ROOT r = (f32[4], (f32[4], f32[4])) tuple(s, t)
}"""


def test_forwarded_elements_and_dead_code_keep_the_results():
    proto = hlo.load(TEXT).to_bytes()
    exe = compile_proto(proto)
    (main,) = exe.artifact.program.computations
    assert [i.op for i in main.instructions] == ["tuple", "subtract", "tuple"]  # no gte, no dead exp/broadcast
    inputs = [rand(4), rand(4, seed=1)]
    assert_close(exe.run(inputs), XlaCpuExecutable(proto).run(inputs))
    np.testing.assert_array_equal(exe.run(inputs)[0], inputs[1] - inputs[0])
