"""The compiler's API, determinism, manifest and errors, on small JAX graphs."""
from __future__ import annotations

import numpy as np
import pytest

import hlo
from emulator import ArtifactError, load_artifact
from emulator.executor import EmulatorError
from neuron_customcall.compiler import COMPILER_VERSION, CompileError, CompileFlags, compile_module
from tests.neuron_customcall.compiler.ours import assert_close, jax_proto, run_jax


def _mlp(w1, b1, w2, b2, x):
    import jax

    h = jax.nn.relu(x @ w1 + b1)
    return jax.nn.log_softmax(h @ w2 + b2), h.sum()


def _args(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in [(8, 16), (16,), (16, 4), (4,), (2, 8)]]


def test_mlp_forward_matches_xla():
    assert_close(*run_jax(_mlp, *_args()))


def test_same_module_and_flags_give_identical_bytes():
    module = hlo.load(jax_proto(_mlp, *_args()))
    assert compile_module(module) == compile_module(hlo.load(jax_proto(_mlp, *_args())))
    assert compile_module(module, CompileFlags(instruction_names=False)) != compile_module(module)


def test_manifest_describes_inputs_outputs_and_provenance():
    module = hlo.load(jax_proto(_mlp, *_args()))
    exe = load_artifact(compile_module(module))
    m = exe.manifest
    assert [(e["dtype"], e["shape"]) for e in m["inputs"]] == [("f32", [8, 16]), ("f32", [16]), ("f32", [16, 4]),
                                                               ("f32", [4]), ("f32", [2, 8])]
    assert [(e["dtype"], e["shape"]) for e in m["outputs"]] == [("f32", [2, 4]), ("f32", [])]
    assert m["hlo_fingerprint"] == hlo.fingerprint(module)
    assert m["compiler_version"] == COMPILER_VERSION
    assert m["flags"] == {"verify": True, "instruction_names": True}


def test_run_validates_inputs():
    exe = load_artifact(compile_module(hlo.load(jax_proto(_mlp, *_args()))))
    args = _args()
    with pytest.raises(EmulatorError, match="expected 5 inputs"):
        exe.run(args[:4])
    with pytest.raises(EmulatorError, match="dtype"):
        exe.run(args[:4] + [args[4].astype(np.float64)])
    with pytest.raises(EmulatorError, match="shape"):
        exe.run(args[:4] + [args[4][:1]])


def test_load_from_path(tmp_path):
    p = tmp_path / "m.neff"
    p.write_bytes(compile_module(hlo.load(jax_proto(_mlp, *_args()))))
    out = load_artifact(p).run(_args())
    assert out[0].shape == (2, 4)
    with pytest.raises(ArtifactError, match="can not read"):
        load_artifact(tmp_path / "missing.neff")


def test_unsupported_opcode_names_instruction_and_location():
    module = hlo.load(jax_proto(_mlp, *_args()))
    inst = next(i for i in module.entry.instructions if i.opcode == "dot")
    inst.opcode = "mulhi"
    with pytest.raises(CompileError) as err:
        compile_module(module)
    msg = str(err.value)
    assert "mulhi" in msg and inst.name in msg and module.entry.name in msg
    assert inst.source_location and inst.source_location in msg
    assert err.value.opcode == "mulhi" and err.value.instruction == inst.name


def test_bad_shapes_are_compile_errors():
    module = hlo.load(jax_proto(_mlp, *_args()))
    inst = next(i for i in module.entry.instructions if i.opcode == "add")
    from hlo import Shape

    inst.shape = Shape.array("F32", (3, 3))
    with pytest.raises(CompileError, match="does not match"):
        compile_module(module)


def test_neuron_custom_call_without_a_kernel_descriptor_is_a_compile_error():
    from tests.hlo import framework_modules as fm

    module = hlo.load(fm.serialized("jax/custom_call"))
    with pytest.raises(CompileError, match="invalid kernel descriptor in backend_config"):
        compile_module(module)


def _sgd(w, x, y):
    import jax

    g = jax.grad(lambda w: ((x @ w - y) ** 2).sum())(w)
    return w - 0.1 * g


def test_weight_gradient_transpose_is_fused_and_update_runs_in_place():
    args = _args()
    w, x, y = args[0], args[4], np.ones((2, 16), np.float32)
    exe = load_artifact(compile_module(hlo.load(jax_proto(_sgd, w, x, y))))
    insts = [i for c in exe.artifact.program.computations for i in c.instructions]
    assert any(i.op == "dot" and i.attrs["out_perm"] for i in insts)
    assert any(i.op == "subtract" and i.reuse >= 0 for i in insts)
    assert_close(*run_jax(_sgd, w, x, y))


def test_an_operand_used_twice_is_not_overwritten():
    def f(a, b):
        t = a + b
        return t * t + t

    exe = load_artifact(compile_module(hlo.load(jax_proto(f, *_args()[:2]))))
    ms = [i for i in exe.artifact.program.computations[0].instructions if i.op == "multiply"]
    assert ms and all(i.reuse < 0 for i in ms)
    assert_close(*run_jax(f, *_args()[:2]))


_PAD = """
HloModule m
ENTRY e {
  x = f32[3] parameter(0)
  z = f32[] constant(0)
  ROOT p = f32[9] pad(x, z), padding=1_1_1
}"""


@pytest.mark.parametrize("text,message", [
    (_PAD, "pad of f32"),
    (_PAD.replace("f32[3] parameter(0)", "f6e2m3fn[3] parameter(0)")
     .replace("f32[] constant(0)", "f6e2m3fn[] constant(0)").replace("f32[9]", "f6e2m3fn[7]"),
     "element type F6E2M3FN is not supported"),
    ("""
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT c = f32[4] custom-call(x), custom_call_target="SomethingElse"
}""", "custom-call target 'SomethingElse' is not supported"),
    ("""
HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  v = f32[2] broadcast(b), dimensions={}
  s = f32[1] slice(v), slice={[0:1]}
  c = f32[] reshape(s)
  ROOT r = f32[] add(a, c)
}
ENTRY e {
  x = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=add
}""", "applied element-wise"),
    ("""
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT r = f32[4] cosh(x)
}""", "opcode 'cosh' is not supported"),
    ("""
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  i = s32[] parameter(1)
  ROOT d = f32[5] dynamic-slice(x, i), dynamic_slice_sizes={5}
}""", "dynamic-slice sizes"),
])
def test_compile_errors_name_the_problem(text, message):
    with pytest.raises(CompileError, match=message):
        compile_module(hlo.load(text))


def test_donated_input_is_recorded_as_an_alias():
    import jax

    w = np.ones((3, 4), np.float32)
    proto = jax.jit(lambda w, g: (w - 0.1 * g, g.sum()), donate_argnums=(0,)).lower(w, w) \
        .compiler_ir("hlo").as_serialized_hlo_module_proto()
    exe = load_artifact(compile_module(hlo.load(proto)))
    assert exe.manifest["aliases"] == [{"output": 0, "input": 0, "kind": "may-alias"}]
    np.testing.assert_allclose(exe.run([w, w])[0], w - 0.1 * w)


_ALIASED = """
HloModule m, input_output_alias={ {1}: (1, {}, must-alias) }
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  a = f32[4] add(x, y)
  ROOT t = (f32[4], f32[4]) tuple(x, a)
}"""


def test_must_alias_is_recorded_and_checked():
    exe = load_artifact(compile_module(hlo.load(_ALIASED)))
    assert exe.manifest["aliases"] == [{"output": 1, "input": 1, "kind": "must-alias"}]
    bad = _ALIASED.replace("y = f32[4] parameter(1)", "y = f32[4] parameter(1)\n  z = f32[2] parameter(2)") \
        .replace("(1, {}, must-alias)", "(2, {}, must-alias)")
    with pytest.raises(CompileError, match="differ in size"):
        compile_module(hlo.load(bad))


def test_an_alias_between_shapes_of_one_byte_size_is_xlas():
    """XLA checks an alias's byte sizes, not its shapes (HloInputOutputAliasConfig::Verify): XLA's
    dynamic_ops_test updates a parameter in place and returns it bitcast to another shape."""
    text = """
HloModule m, input_output_alias={ {}: (0, {}) }
ENTRY e {
  p = bf16[4,6] parameter(0)
  u = bf16[1,6] parameter(1)
  z = s32[] constant(0)
  d = bf16[4,6] dynamic-update-slice(p, u, z, z)
  ROOT b = bf16[4,3,2] bitcast(d)
}"""
    exe = load_artifact(compile_module(hlo.load(text)))
    assert exe.manifest["aliases"] == [{"output": 0, "input": 0, "kind": "may-alias"}]
    p = np.arange(24, dtype=np.float32).reshape(4, 6)
    u = -np.ones((1, 6), np.float32)
    import ml_dtypes
    out = exe.run([p.astype(ml_dtypes.bfloat16), u.astype(ml_dtypes.bfloat16)])[0]
    want = p.copy()
    want[0] = -1
    np.testing.assert_array_equal(out.astype(np.float32), want.reshape(4, 3, 2))
