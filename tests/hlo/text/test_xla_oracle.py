"""Our reader and printer against XLA's own (jaxlib 0.10.2) on live modules and hand-written ones.

For each text: (1) our reading equals XLA's reading of the same text (canonical form, see
hlo/text/canonical.py) - this is what proves the parser fills the proto as XLA does; (2) for
framework modules, our reading of XLA's printing equals the binary proto the framework produced
(as XLA holds it once loaded); (3) our printing reads back equal with our parser; (4) XLA's parser
accepts our printing and reads the same instructions (names, opcodes, shapes, operands, callees)
and the same canonical proto.
"""
from __future__ import annotations

import functools
import os

import numpy as np
import pytest

from hlo.schema import hlo_pb2
from hlo.text import parse_hlo_text, print_hlo_text
from hlo.canonical import canonical_module
from tests.hlo import framework_corpus  # noqa: F401  (registers the corpus)
from tests.hlo import framework_modules as fm
from tests.hlo.text.oracle import canonical_diff, instruction_summary, xla_parse, xla_roundtrip, xla_text
from tests.hlo.text.snippets import SNIPPETS

os.environ.setdefault("PJRT_DEVICE", "CPU")


def check_text(text: str, expected: hlo_pb2.HloModuleProto | None = None) -> hlo_pb2.HloModuleProto:
    """The four checks of the module docstring on one text; returns our reading."""
    ours = parse_hlo_text(text)
    if "api_version=API_VERSION_UNSPECIFIED" not in text:  # XLA prints it but refuses to read it
        diff = canonical_diff(ours, xla_parse(text))
        assert not diff, "our reading differs from XLA's:\n" + diff
    if expected is not None:
        diff = canonical_diff(ours, expected)
        assert not diff, "our reading differs from the binary proto:\n" + diff
    printed = print_hlo_text(ours)
    again = parse_hlo_text(printed)
    assert canonical_module(again) == canonical_module(ours), "our printing does not read back equal"
    theirs = xla_parse(printed)
    assert instruction_summary(theirs) == instruction_summary(ours)
    diff = canonical_diff(ours, theirs)
    assert not diff, "XLA reads our printing differently:\n" + diff
    return ours


@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_snippet_against_xla(name):
    check_text(SNIPPETS[name])


@pytest.mark.parametrize("name", fm.names())
def test_framework_module_text(name):
    """Registry modules (JAX and torch_xla): XLA's printing, with metadata and stack frames."""
    data = fm.serialized(name)
    check_text(xla_text(data), xla_roundtrip(data))


@pytest.mark.parametrize("name", fm.names())
def test_binary_proto_prints_and_reads_back(name):
    """A framework's binary proto, printed by us directly: our reading gives it back (up to what
    XLA fills on load, canonical form), and XLA reads our text as it loads the binary."""
    data = fm.serialized(name)
    raw = hlo_pb2.HloModuleProto()
    raw.ParseFromString(data)
    text = print_hlo_text(raw)
    ours = parse_hlo_text(text)
    diff = canonical_diff(ours, raw, strict=False)
    assert not diff, diff
    diff = canonical_diff(xla_parse(text), xla_roundtrip(data))
    assert not diff, diff


@pytest.mark.parametrize("name", fm.names())
def test_printing_is_xlas_byte_for_byte(name):
    """Our printer writes what XLA's printer writes (operand shapes inline), character for character;
    the one deliberate difference: XLA writes api_version=API_VERSION_UNSPECIFIED, which its own
    parser refuses, so we leave it out."""
    theirs = xla_text(fm.serialized(name), operand_shapes=True)
    ours = print_hlo_text(parse_hlo_text(theirs))
    assert ours == theirs.replace(" api_version=API_VERSION_UNSPECIFIED,", "")


@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_snippet_printing_is_xlas(name):
    """XLA's printing of each snippet, read and printed by us, comes out identical (the header may
    lose HloModuleConfig attributes such as replica_count, which no proto field holds)."""
    from jaxlib import _hlo

    options = _hlo.HloPrintOptions()
    options.print_large_constants = True
    options.print_operand_shape = True
    theirs = _hlo.hlo_module_from_text(SNIPPETS[name]).to_string(options)
    ours = print_hlo_text(parse_hlo_text(theirs))
    assert ours.split("\n")[1:] == theirs.split("\n")[1:]
    assert theirs.startswith(ours.split("\n")[0])


# ---------------------------------------------------------------------------------------- JAX
def _jax_functions() -> dict:
    import jax
    import jax.numpy as jnp
    from jax import lax

    f32 = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    return {
        "matmul": (lambda a, b: a @ b, (f32, f32.T)),
        "conv": (lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME"), (np.ones((1, 3, 6, 6), np.float32), np.ones((2, 3, 3, 3), np.float32))),
        "reduce_max": (lambda x: jnp.max(x, axis=1) + jnp.sum(x), (f32,)),
        "fori_loop": (lambda x: lax.fori_loop(0, 5, lambda i, c: c * 2 + i, x), (f32,)),
        "cond": (lambda p, x: lax.cond(p > 0, lambda x: x + 1, lambda x: x - 1, x), (np.int32(1), f32)),
        "switch": (lambda i, x: lax.switch(i, [lambda x: x, jnp.sin, jnp.cos], x), (np.int32(2), f32)),
        "scan": (lambda x: lax.scan(lambda c, a: (c + a, c * a), 0.0, x), (f32[0],)),
        "sort": (lambda x: jnp.sort(x, axis=0), (f32,)),
        "argsort": (lambda x: jnp.argsort(x[0]), (f32,)),
        "gather_scatter": (lambda x, i: x[i].sum() + x.at[i].set(0.0), (f32, np.array([1, 3], np.int32))),
        "argmax": (lambda x: jnp.argmax(x, axis=1), (f32,)),
        "cumsum": (lambda x: jnp.cumsum(x, axis=1), (f32,)),
        "random": (lambda k: jax.random.uniform(jax.random.PRNGKey(k), (3,)), (np.int32(0),)),
        "dynamic_slice": (lambda x, i: lax.dynamic_update_slice(x, lax.dynamic_slice(x, (i, 0), (2, 2)) * 2, (0, i)), (f32, np.int32(1))),
        "pad_concat": (lambda x: jnp.concatenate([jnp.pad(x, ((1, 2), (0, 3))), jnp.ones((3, 9))]), (f32,)),
        "iota": (lambda x: x + jnp.arange(6, dtype=jnp.float32), (f32,)),
        "dtypes": (lambda x: ((x.astype(jnp.bfloat16) * 2).astype(jnp.float16) + 1).astype(jnp.int8).astype(jnp.uint32), (f32,)),
        "constants": (lambda x: x[0, :4] + jnp.array([1.5, np.inf, -np.inf, np.nan], jnp.float32), (f32,)),
        "grad": (jax.grad(lambda x: jnp.sum(jnp.tanh(x) ** 2)), (f32,)),
        "custom_vjp": (_custom_vjp(), (f32,)),
        "while_loop": (lambda x: lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 2), (0, x))[1], (f32,)),
        "complex_fft": (lambda x: jnp.fft.fft(x.astype(jnp.complex64)).real, (f32,)),
        "neuron_custom_call": (_neuron_custom_call, (f32, np.arange(3, dtype=np.int32))),
    }


def _neuron_custom_call(x, y):
    """Our target as JAX lowers an FFI call: aliasing, side effect, an MLIR-dictionary backend config."""
    import jax

    return jax.ffi.ffi_call(
        "AwsNeuronCustomNativeKernel",
        (jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(y.shape, y.dtype)),
        input_output_aliases={0: 0}, has_side_effect=True,
    )(x, y, name="k", scale=np.float32(0.5), flags=np.array([1, 2], np.int32))


def _custom_vjp():
    import jax
    import jax.numpy as jnp

    @jax.custom_vjp
    def f(x):
        return jnp.sin(x)

    f.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, g: (g * c,))
    return jax.grad(lambda x: f(x).sum())


@functools.cache
def _lowered(name: str):
    import jax

    fn, args = _jax_functions()[name]
    return jax.jit(fn).lower(*args)


JAX_NAMES = ["matmul", "conv", "reduce_max", "fori_loop", "cond", "switch", "scan", "sort", "argsort",
             "gather_scatter", "argmax", "cumsum", "random", "dynamic_slice", "pad_concat", "iota", "dtypes",
             "constants", "grad", "custom_vjp", "while_loop", "complex_fft", "neuron_custom_call"]


def _without_metadata(proto: hlo_pb2.HloModuleProto) -> hlo_pb2.HloModuleProto:
    out = hlo_pb2.HloModuleProto()
    out.CopyFrom(proto)
    out.ClearField("stack_frame_index")
    for comp in out.computations:
        for inst in comp.instructions:
            inst.metadata.Clear()
    return out


@pytest.mark.parametrize("name", JAX_NAMES)
def test_jax_as_text(name):
    """`jax.jit(f).lower(...).as_text(dialect='hlo')`: no metadata in this form."""
    lowered = _lowered(name)
    text = lowered.as_text(dialect="hlo")
    binary = hlo_pb2.HloModuleProto()
    binary.ParseFromString(lowered.compiler_ir("hlo").as_serialized_hlo_module_proto())
    check_text(text, _without_metadata(binary))


@pytest.mark.parametrize("name", JAX_NAMES)
def test_jax_module_to_string(name):
    """XLA's printing of the module (metadata, stack frames) equals the binary proto."""
    ir = _lowered(name).compiler_ir("hlo")
    binary = hlo_pb2.HloModuleProto()
    binary.ParseFromString(ir.as_serialized_hlo_module_proto())  # JAX's own bytes, as they are
    text = ir.get_hlo_module().to_string()
    ours = check_text(text, binary)
    assert print_hlo_text(ours, print_operand_shapes=False) == text  # and we print it as XLA does


@pytest.mark.parametrize("name", ["matmul", "conv", "fori_loop", "cond", "sort", "gather_scatter", "random", "dtypes"])
def test_jax_compiled_scheduled_text(name):
    """XLA:CPU's optimised module: is_scheduled=true, fusions, copies, scheduled order."""
    text = _lowered(name).compile().as_text()
    assert "is_scheduled=true" in text
    ours = check_text(text)
    assert ours.schedule.sequences


# ------------------------------------------------------------------------------------ torch_xla
@functools.cache
def _torch_graph_texts() -> dict[str, str]:
    """Each graph's HLO text. Only the text is cached: cached XLA tensors would keep their pending
    graphs (our custom-call among them) alive, and the next torch_xla.sync() anywhere in the
    process would hand them to XLA:CPU, which cannot run that target."""
    import torch_xla

    return {name: torch_xla._XLAC._get_xla_tensors_hlo(outs) for name, outs in _torch_graphs().items()}


def _torch_graphs():
    import torch
    import torch_xla

    dev = torch_xla.device()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 8, generator=g).to(dev)
    w = torch.randn(8, 3, generator=g).to(dev)
    return {
        "softmax_matmul": [torch.nn.functional.softmax(x @ w, dim=-1).sum(0)],
        "conv_pool": [torch.nn.functional.max_pool2d(torch.nn.functional.conv2d(
            x.reshape(1, 2, 4, 4), torch.ones(3, 2, 3, 3).to(dev), padding=1), 2)],
        "index_sort_cat": [torch.sort(torch.cat([x, x * 2])[torch.tensor([0, 5, 2]).to(dev)], dim=-1)[0]],
        "dtypes_where": [torch.where(x > 0, x.to(torch.bfloat16).float(), x.to(torch.float16).float()).to(torch.int32)],
        "neuron_custom_call": [_torch_custom_call(x) + 1],
    }


def _torch_custom_call(x):
    """Our target as torch_xla emits it; its text says api_version=API_VERSION_UNSPECIFIED, which
    XLA's own parser refuses and ours reads."""
    import torch
    from torch_xla.experimental.stablehlo_custom_call import stablehlo_custom_call

    return stablehlo_custom_call([x], "AwsNeuronCustomNativeKernel", [list(x.shape)], [torch.float32],
                                 backend_config="e30=", has_side_effect=True,
                                 frontend_attributes={"neuron_kernel": "demo"})


@pytest.mark.parametrize("name", ["softmax_matmul", "conv_pool", "index_sort_cat", "dtypes_where", "neuron_custom_call"])
def test_torch_xla_tensors_hlo(name):
    text = _torch_graph_texts()[name]
    assert text.startswith("HloModule ")
    check_text(text)


# ------------------------------------------------------------------------------ --xla_dump_to
DUMP_SCRIPT = """
import jax, jax.numpy as jnp
from jax import lax
jax.jit(lambda x: lax.fori_loop(0, 3, lambda i, c: jnp.sin(c) @ c, x))(jnp.ones((4, 4)))
jax.jit(lambda x, i: jnp.sort(x.at[i].add(1.0))[::2])(jnp.arange(8.0), 3)
"""


def test_xla_dump_to_text_files(tmp_path):
    """`.txt` dumps XLA writes with --xla_dump_to (before and after optimisations, scheduled)."""
    import subprocess
    import sys

    env = dict(os.environ, XLA_FLAGS=f"--xla_dump_to={tmp_path} --xla_dump_hlo_as_text", JAX_PLATFORMS="cpu")
    subprocess.run([sys.executable, "-c", DUMP_SCRIPT], env=env, check=True, timeout=240, capture_output=True)
    dumps = sorted(p for p in tmp_path.glob("*.txt") if p.read_text().startswith("HloModule "))
    assert len(dumps) >= 4
    assert any("is_scheduled=true" in p.read_text() for p in dumps)
    for path in dumps:
        text = path.read_text()
        ours = check_text(text)
        # byte for byte, but for the header's HloModuleConfig attributes (no proto field holds them)
        assert print_hlo_text(ours, print_operand_shapes=False).split("\n")[1:] == text.split("\n")[1:]


SHARDED_SCRIPT = """
import json, sys
import jax, jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
mesh = Mesh(np.array(jax.devices()).reshape(2, 2), ("x", "y"))
f = jax.jit(lambda a, b: jnp.sin(a) @ b + 1,
            in_shardings=(NamedSharding(mesh, P("x", "y")), NamedSharding(mesh, P("y", None))),
            out_shardings=NamedSharding(mesh, P("x", "y")))
low = f.lower(jnp.ones((8, 8)), jnp.ones((8, 8)))
from jax import lax
def body(a):
    s = lax.psum(a, "x")
    g = lax.all_gather(a, "y", tiled=True)
    p = lax.ppermute(a, "x", [(0, 1), (1, 0)])
    t = lax.all_to_all(a, "y", 0, 0, tiled=True)
    r = lax.psum_scatter(a, "y", scatter_dimension=0, tiled=True)
    return s + p, g, t, r
spmd = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("x", "y"), check_vma=False,
                             out_specs=(P("x", "y"), P("x", None), P("x", "y"), P("x", "y"))))
low2 = spmd.lower(jnp.ones((8, 8)))
json.dump([low.as_text(dialect="hlo"), low.compiler_ir("hlo").get_hlo_module().to_string(),
           low.compile().as_text(), low2.as_text(dialect="hlo"),
           low2.compiler_ir("hlo").get_hlo_module().to_string(), low2.compile().as_text()],
          open(sys.argv[1], "w"))
"""


def test_jax_sharded_module_texts(tmp_path):
    """A 4-device sharded jit: shardings, Shardy frontend attributes (`{mesh = #sdy.mesh<...>}`
    values, unquoted), sharding custom-calls, the SPMD-partitioned compiled module; and a
    shard_map with psum, all_gather, ppermute, all_to_all and psum_scatter (collectives)."""
    import json
    import subprocess
    import sys

    out = tmp_path / "texts.json"
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    subprocess.run([sys.executable, "-c", SHARDED_SCRIPT, str(out)], env=env, check=True, timeout=240,
                   capture_output=True)
    lowered, module_text, compiled, spmd_lowered, spmd_text, spmd_compiled = json.loads(out.read_text())
    assert "xla.sdy.meshes={mesh = #sdy.mesh<" in lowered
    assert all(op in spmd_text for op in ("all-reduce(", "all-gather(", "collective-permute(", "all-to-all(",
                                          "reduce-scatter("))
    for text in (lowered, module_text, compiled, spmd_lowered, spmd_text, spmd_compiled):
        check_text(text)
    for text in (module_text, compiled, spmd_text, spmd_compiled):  # XLA's ToString style, which is ours
        ours = print_hlo_text(parse_hlo_text(text), print_operand_shapes=False)
        assert ours.split("\n")[1:] == text.split("\n")[1:]
