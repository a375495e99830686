"""The SPMD pass (neuron_customcall/compiler/spmd): sharding forms read into tile layouts, the
per-partition module it makes run on every partition at once (emulator.collectives.run) against
NumPy, and the forms it refuses by name. JAX's own programs are tested end to end in
tests/neuron_customcall/pjrt/test_jax_spmd.py."""
from __future__ import annotations

import numpy as np
import pytest

import hlo
from hlo.schema import xla_data_pb2
from neuron_customcall import backend
from neuron_customcall.compiler import spmd
from neuron_customcall.compiler.spmd import sharding as sh

OpSharding = xla_data_pb2.OpSharding


def _sharding_of(text: str, rank: int, n: int) -> sh.TileLayout:
    dims = ",".join(["4"] * rank)
    module = hlo.load(f"HloModule m\nENTRY main {{\n  ROOT p = f32[{dims}] parameter(0), sharding={text}\n}}\n")
    return sh.from_op_sharding(module.entry.root.attributes.sharding, rank, n, "p")


@pytest.mark.parametrize("text,rank,n,tiles", [
    ("{replicated}", 2, 2, [[[0, 1]]]),
    ("{devices=[2,1]<=[2]}", 2, 2, [[[0]], [[1]]]),
    # iota [2,2] transposed: tile (i, j) on device 2j + i
    ("{devices=[2,2]<=[2,2]T(1,0)}", 2, 4, [[[0], [2]], [[1], [3]]]),
    ("{devices=[2,1,2]<=[4] last_tile_dim_replicate}", 2, 4, [[[0, 1]], [[2, 3]]]),
    ("{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}", 2, 4, [[[0, 2], [1, 3]]]),
    ("{devices=[2,1]1,0}", 2, 2, [[[1]], [[0]]]),
    ("{devices=[2,1,2]0,3,1,2 last_tile_dims={replicated}}", 2, 4, [[[0, 3]], [[1, 2]]]),
])
def test_hlo_shardings_become_tile_layouts(text, rank, n, tiles):
    layout = _sharding_of(text, rank, n)
    assert layout.tiles.tolist() == tiles and layout.maximal is None


def test_maximal_and_refused_hlo_shardings():
    layout = _sharding_of("{maximal device=1}", 2, 2)
    assert layout.maximal == 1 and layout.shard_dims((4, 6), "p") == (4, 6)
    with pytest.raises(sh.UnsupportedShardingError, match="manual"):
        _sharding_of("{devices=[2,1,2]<=[4] last_tile_dims={manual}}", 2, 4)
    with pytest.raises(sh.UnsupportedShardingError, match="manual sharding"):
        _sharding_of("{manual}", 2, 2)
    with pytest.raises(sh.UnsupportedShardingError, match="partitions, each once"):
        _sharding_of("{devices=[2,1]<=[2]}", 2, 4)  # covers 2 of 4 partitions
    assert _sharding_of("{devices=[2,1]<=[2]}", 2, 2).shard_dims((3, 4), "p") == (2, 4)  # padded as XLA's


def test_shardy_strings_become_tile_layouts():
    meshes = sh.parse_meshes('{mesh = #sdy.mesh<["a"=2, "b"=2]>, other = #sdy.mesh<["x"=2], device_ids=[1,0]>}')
    assert set(meshes) == {"mesh", "other"}
    [(name, dims, rest)] = sh.parse_sharding_list('#sdy.sharding_per_value<[<@mesh, [{"b", ?}, {"a"}]>]>')
    assert (name, dims, rest.strip()) == ("mesh", [["b"], ["a"]], "")
    # dim 0 over b, dim 1 over a: device (a, b) = 2a + b holds tile (b, a)
    assert sh.from_sdy(meshes["mesh"], dims, 4, "v").tiles.tolist() == [[[0], [2]], [[1], [3]]]
    # only the manual axes tile (a shard_map manual over "a"): "b" replicates
    assert sh.from_sdy(meshes["mesh"], [["a"], []], 4, "v", frozenset({"a"})).tiles.tolist() == [[[0, 1]], [[2, 3]]]
    assert sh.from_sdy(meshes["other"], [["x"]], 2, "v").tiles.tolist() == [[1], [0]]
    two = sh.parse_sharding_list('#sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>, <@mesh, []>]>')
    assert [d for _, d, _ in two] == [[["a"], []], []]
    with pytest.raises(sh.UnsupportedShardingError, match="sub-axes"):
        sh.parse_sharding_list('#sdy.sharding<@mesh, [{"a":(1)2}, {}]>')
    with pytest.raises(sh.UnsupportedShardingError, match="free axes before manual"):
        sh.from_sdy(meshes["mesh"], [["b", "a"]], 4, "v", frozenset({"a"}))


def _run(text: str, n: int, args: list[np.ndarray]) -> tuple[list[list[np.ndarray]], spmd.Partitioned]:
    """Partitions the module, gives each partition its tiles of `args`, runs all partitions."""
    from emulator.collectives.run import run_devices

    module = hlo.load(text)
    part = spmd.partition(module, n)
    compiled = backend.compile_cached(module.to_bytes(), cache=False)
    inputs = [[_tile(a, lay, p) for a, lay in zip(args, part.parameters)] for p in range(n)]
    return run_devices(compiled.executable, inputs, 1, n, timeout_s=60), part


def _tile(a: np.ndarray, layout: sh.TileLayout, p: int) -> np.ndarray:
    """Partition p's tile of `a`; uneven tiles padded with NaN (XLA leaves the padding undefined)."""
    if layout.maximal is not None or layout.is_replicated:
        return a
    dims = layout.shard_dims(a.shape, "test")
    padded = np.full([t * d for t, d in zip(layout.tile_counts, dims)], np.nan, a.dtype)
    padded[tuple(slice(0, n) for n in a.shape)] = a
    index = tuple(slice(i * d, (i + 1) * d) for i, d in zip(layout.tile_index(p), dims))
    return np.ascontiguousarray(padded[index])


def test_partitioned_modules_match_numpy():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    y = (np.arange(24, dtype=np.float32).reshape(4, 6) - 7) / 3
    outs, part = _run("""HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  p = f32[4,6]{1,0} parameter(0), sharding={devices=[2,2]<=[2,2]T(1,0)}
  q = f32[4,6]{1,0} parameter(1), sharding={maximal device=3}
  m = f32[4,6]{1,0} multiply(p, q)
  t = f32[6,4]{1,0} transpose(m), dimensions={1,0}
  c = f32[] constant(0)
  s = f32[6]{0} reduce(t, c), dimensions={1}, to_apply=add
  ROOT r = (f32[6,4]{1,0}, f32[6]{0}, f32[4,6]{1,0}) tuple(t, s, p), sharding={{devices=[1,2,2]<=[4] last_tile_dim_replicate}, {devices=[2,2]1,0,3,2 last_tile_dim_replicate}, {devices=[4,1]3,1,2,0}}
}
""", 4, [x, y])
    ref = [(x * y).T, (x * y).T.sum(1), x]
    for p in range(4):
        for k, (got, want, layout) in enumerate(zip(outs[p], ref, part.results)):
            np.testing.assert_array_equal(got, _tile(want, layout, p), err_msg=f"partition {p} result {k}")
    # what the frameworks read back: per-partition signature and the layouts as OpShardings
    proto = part.module.to_proto()
    assert [list(s.dimensions) for s in proto.host_program_shape.parameters] == [[2, 3], [4, 6]]
    assert [s.type for s in proto.spmd_parameters_shardings] == [OpSharding.OTHER, OpSharding.MAXIMAL]
    assert proto.spmd_output_sharding.type == OpSharding.TUPLE
    assert [list(s.tile_assignment_devices) for s in proto.spmd_output_sharding.tuple_shardings] == \
        [[0, 1, 2, 3], [1, 0, 3, 2], [3, 1, 2, 0]]


def test_uneven_tiles_are_padded_as_xla_pads_them():
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    outs, part = _run("""HloModule m
ENTRY main {
  p = f32[5,3]{1,0} parameter(0), sharding={devices=[2,1]<=[2]}
  ROOT r = f32[5,3]{1,0} negate(p), sharding={devices=[1,2]<=[2]}
}
""", 2, [x])
    assert [o[0].shape for o in outs] == [(5, 2), (5, 2)]
    np.testing.assert_array_equal(outs[0][0], -x[:, :2])
    np.testing.assert_array_equal(outs[1][0][:, :1], -x[:, 2:])  # column 1 of partition 1 is padding


def _all_reduce_body(groups: str) -> str:
    """A manual body as both spellings call it: an all-reduce (sum) over `groups`."""
    return ("add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
            "body {\n  a = f32[2,8]{1,0} parameter(0)\n  ROOT r = f32[2,8]{1,0} all-reduce(a), channel_id=1, "
            f"replica_groups={groups}, use_global_device_ids=true, to_apply=add\n}}\n")


def test_manual_regions_slice_and_gather_and_annotations_vanish():
    # a shard_map as JAX lowers it (Shardy export): manual over "x" of a 2x2 mesh, a psum inside
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    outs, part = _run("""HloModule m, frontend_attributes={xla.sdy.meshes="{mesh = #sdy.mesh<[\\"x\\"=2, \\"y\\"=2]>}"}
""" + _all_reduce_body("{{0,1},{2,3}}") + """ENTRY main {
  p = f32[4,8]{1,0} parameter(0)
  s = f32[4,8]{1,0} custom-call(p), custom_call_target="Sharding", sharding={replicated}
  l = f32[2,8]{1,0} custom-call(s), custom_call_target="xla.sdy.GlobalToLocalShape", frontend_attributes={xla.sdy.in_shardings="#sdy.sharding_per_value<[<@mesh, [{\\"x\\"}, {}]>]>",xla.sdy.manual_axes="#sdy<manual_axes{\\"x\\"}>"}
  c = f32[2,8]{1,0} call(l), to_apply=body
  g = f32[4,8]{1,0} custom-call(c), custom_call_target="xla.sdy.LocalToGlobalShape", frontend_attributes={xla.sdy.manual_axes="#sdy<manual_axes{\\"x\\"}>",xla.sdy.out_shardings="#sdy.sharding_per_value<[<@mesh, [{\\"x\\"}, {}]>]>"}
  ROOT f = f32[4,8]{1,0} custom-call(g), custom_call_target="xla.sdy.FuncResultSharding"
}
""", 4, [x])
    # x is the major mesh axis: partitions {0, 1} hold rows 0-1, {2, 3} rows 2-3; the all-reduce
    # over {0, 1} and {2, 3} adds the two copies of each tile
    assert [lay.tile_counts for lay in part.parameters] == [(2, 1)]  # taken from the shard_map
    for p in range(4):
        rows = slice(0, 2) if p < 2 else slice(2, 4)
        np.testing.assert_array_equal(outs[p][0], 2 * x[rows])
    targets = {i.attributes.custom_call_target for i in part.module.instructions() if i.opcode == "custom-call"}
    opcodes = {i.opcode for i in part.module.entry.instructions}
    assert targets == set() and "all-gather" not in opcodes  # tiles in, tiles out: no gather at the edges


def test_gspmd_manual_regions():
    # the same shard_map as JAX lowers it without Shardy: Sharding + SPMDFullToShardShape in,
    # SPMDShardToFullShape out; manual over x of a 2x2 mesh (y a replicated subgroup)
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    outs, part = _run("""HloModule m
""" + _all_reduce_body("{{0,2},{1,3}}") + """ENTRY main {
  p = f32[4,8]{1,0} parameter(0)
  s = f32[4,8]{1,0} custom-call(p), custom_call_target="Sharding", sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}
  l = f32[2,8]{1,0} custom-call(s), custom_call_target="SPMDFullToShardShape", sharding={devices=[1,1,2,2]<=[4] last_tile_dims={manual, replicated}}
  c = f32[2,8]{1,0} call(l), to_apply=body
  m = f32[2,8]{1,0} custom-call(c), custom_call_target="Sharding", sharding={devices=[1,1,2,2]<=[4] last_tile_dims={manual, replicated}}
  ROOT g = f32[2,8]{1,0} custom-call(m), custom_call_target="SPMDShardToFullShape", sharding={replicated}
}
""", 4, [x])
    # partitions {0, 1} hold rows 0-1, {2, 3} rows 2-3; the all-reduce over {0, 2} and {1, 3} adds them
    assert [lay.tile_counts for lay in part.parameters] == [(2, 1)]
    for p in range(4):
        np.testing.assert_array_equal(outs[p][0], x[:2] + x[2:])
    assert not [i for i in part.module.instructions() if i.opcode == "custom-call"]


@pytest.mark.parametrize("text,match", [
    ("p = f32[4,6]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}\n  ROOT r = f32[4,6]{1,0} negate(p)",
     "partitions, each once"),
    ("p = f32[4,6]{1,0} parameter(0)\n  ROOT r = f32[2,6]{1,0} custom-call(p), custom_call_target=\"SPMDFullToShardShape\"",
     "SPMDFullToShardShape r: its operand is not a Sharding annotation"),
    ("p = f32[4,6]{1,0} parameter(0)\n  ROOT r = f32[4,6]{1,0} custom-call(p), custom_call_target=\"xla.sdy.Other\"",
     "'xla.sdy.Other'"),
    ("p = (f32[4]{0}, f32[4]{0}) parameter(0)\n  ROOT r = f32[4]{0} get-tuple-element(p), index=0",
     "only arrays"),
])
def test_refused_programs_name_the_form(text, match):
    module = hlo.load(f"HloModule m\nENTRY main {{\n  {text}\n}}\n")
    with pytest.raises(spmd.UnsupportedShardingError, match=match):
        spmd.partition(module, 2)
