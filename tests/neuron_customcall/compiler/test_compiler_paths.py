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
    assert all(i.attrs["reducer"] == "add" for i in _ops(exe, "reduce-window"))
    assert_close(*run_jax(f, rand(5, 7)))


def test_scan_writes_its_outputs_in_place_without_touching_inputs():
    def rnn(w, xs):
        return lax.scan(lambda h, x: (jnp.tanh(h @ w + x), h), jnp.zeros(w.shape[0]), xs)

    w, xs = rand(8, 8) * 0.3, rand(20, 8, seed=1)
    exe = compile_proto(jax_proto(rnn, w, xs))
    assert [i.reuse for i in _ops(exe, "dynamic-update-slice")] == [0]
    assert not _ops(exe, "call")  # helpers are inlined
    w0, xs0 = w.copy(), xs.copy()
    assert_close(exe.run([w, xs]), run_jax(rnn, w, xs)[1])
    np.testing.assert_array_equal(w, w0)
    np.testing.assert_array_equal(xs, xs0)


def test_in_place_loop_state_is_safe_with_constants_inputs_and_shared_leaves():
    def from_constant(n):
        return lax.fori_loop(0, n, lambda i, b: b.at[i].set(i * 2.0), jnp.zeros(8))

    def from_input(x):
        return lax.fori_loop(0, 5, lambda i, b: b.at[i].add(1.0), x)

    def shared_leaves(x):
        return lax.fori_loop(0, 4, lambda i, c: (lambda u: (u, u))(c[0].at[i].add(1.0 + c[1][i])), (x, x))

    x = rand(8)
    x0 = x.copy()
    for f, args in ((from_constant, (np.int32(6),)), (from_input, (x,)), (shared_leaves, (x,))):
        assert_close(*run_jax(f, *args))
        np.testing.assert_array_equal(x, x0)


def test_convolution_with_mismatched_features_is_a_compile_error():
    import hlo
    import pytest

    from neuron_customcall.compiler import CompileError, compile_module

    text = """
HloModule m
ENTRY e {
  x = f32[2,6,9] parameter(0)
  k = f32[4,2,3] parameter(1)
  ROOT c = f32[2,4,4] convolution(x, k), window={size=3 stride=2}, dim_labels=bf0_oi0->bf0, feature_group_count=3
}"""
    with pytest.raises(CompileError, match="convolution features/groups"):
        compile_module(hlo.load(text))


def test_gather_with_a_wrong_result_shape_is_a_compile_error():
    import hlo
    import pytest

    from neuron_customcall.compiler import CompileError, compile_module

    text = """
HloModule m
ENTRY e {
  x = f32[6,5] parameter(0)
  i = s32[3] parameter(1)
  ROOT g = f32[3,4] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,5}
}"""
    with pytest.raises(CompileError, match="gather gives"):
        compile_module(hlo.load(text))
    assert compile_module(hlo.load(text.replace("f32[3,4] gather", "f32[3,5] gather")))


def test_outputs_never_alias_each_other_inputs_or_constants():
    x = rand(3, 4)
    exe = compile_proto(jax_proto(lambda x: (x + 1, (x + 1).T, x, jnp.ones(3), x.T), x))
    outs = exe.run([x])
    for k, a in enumerate(outs):
        assert a.flags.writeable
        assert not np.may_share_memory(a, x)
        assert not any(np.may_share_memory(a, b) for b in outs[:k])


def test_equal_constants_are_stored_once_and_a_known_fingerprint_is_reused():
    import hlo

    from emulator import load_artifact
    from neuron_customcall.compiler import compile_module

    f = lambda x: (x * 2.0 + 2.0, x - 2.0, x * -0.0 + 0.0)  # noqa: E731
    module = hlo.load(jax_proto(f, rand(3)))
    exe = load_artifact(compile_module(module))
    values = [c.item() for c in exe.artifact.constants]
    assert len(values) == len({(v, np.signbit(v)) for v in values})
    assert_close(exe.run([rand(3)]), run_jax(f, rand(3))[1])
    assert compile_module(module, fingerprint=hlo.fingerprint(module)) == compile_module(module)
    assert load_artifact(compile_module(module, fingerprint="f" * 64)).manifest["hlo_fingerprint"] == "f" * 64


def test_artifacts_are_identical_across_processes(tmp_path):
    import hashlib
    import subprocess
    import sys

    from tests.hlo import framework_corpus  # noqa: F401
    from tests.hlo import framework_modules as fm

    names = ["jax/scan", "jax/random_threefry", "torch_xla/mlp_train_step"]
    for name in names:
        (tmp_path / name.replace("/", "_")).write_bytes(fm.serialized(name))
    script = (
        "import hashlib, sys, hlo\n"
        "from neuron_customcall.compiler import compile_module\n"
        "for p in sys.argv[1:]:\n"
        "    print(hashlib.sha256(compile_module(hlo.load(open(p, 'rb').read()))).hexdigest())\n")
    paths = [str(tmp_path / n.replace("/", "_")) for n in names]
    digests = set()
    for seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", script, *paths], capture_output=True, text=True, check=True,
                             env={**__import__("os").environ, "PYTHONHASHSEED": seed}, timeout=300)
        digests.add(out.stdout)
    import hlo
    from neuron_customcall.compiler import compile_module

    here = "".join(hashlib.sha256(compile_module(hlo.load(fm.serialized(n)))).hexdigest() + "\n" for n in names)
    assert digests == {here}


def test_select_writes_into_a_dead_branch_but_never_into_its_predicate():
    def f(x, y):
        a, b = x * 2.0, y + 1.0
        p = (x > 0) & (y > 0)
        return jnp.where(p, a, b), jnp.where(x > y, x * 3.0, y), lax.select(p, p & (x < 1), p | (y < 1))

    x, y = rand(4, 5), rand(4, 5, seed=1)
    exe = compile_proto(jax_proto(f, x, y))
    sel = _ops(exe, "select")
    assert any(i.reuse in (1, 2) for i in sel) and all(i.reuse != 0 for i in sel)
    assert_close(exe.run([x, y]), run_jax(f, x, y)[1])
