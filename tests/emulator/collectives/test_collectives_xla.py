"""Every collective opcode and replica-group form against XLA:CPU with the same number of devices.

XLA:CPU runs in one subprocess for all cases (xla_cpu_devices.py: the host device count must be
set before jax starts); ours runs the same HLO text compiled by our backend on
emulator.collectives.run_devices. Results must match bit for bit: both reduce in group order (bf16 sums accumulate in f32, as
XLA:CPU's do). XLA:CPU runs neither collective-broadcast nor all-reduce with a reducer it does not
recognise, and refuses partition-id under SPMD partitioning: test_collectives_numpy.py covers
those against NumPy."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import hlo
from emulator.collectives import run_devices
from tests.emulator.collectives.xla_cpu_devices import load_arrays, save_arrays
from tests.neuron_customcall.compiler.ours import compile_proto

ROOT = Path(__file__).resolve().parents[3]

_REDUCERS = """
add_{t} {
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT r = {t}[] add(a, b)
}
max_{t} {
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT r = {t}[] maximum(a, b)
}
"""


def _module(body: str, t: str, replicas: int, partitions: int = 1, params: str = "p = {t}[4,6] parameter(0)") -> str:
    header = f"HloModule m, replica_count={replicas}" + (f", num_partitions={partitions}" if partitions > 1 else "")
    lines = "\n  ".join(line.strip() for line in body.strip().splitlines())
    text = header + "\n" + _REDUCERS + "\nENTRY e {\n  " + params + "\n  " + lines + "\n}\n"
    return text.replace("{t}", t)


#: name -> (body, element type, replicas, partitions)
_BODIES = {
    "all_reduce_sum": ("ROOT r = {t}[4,6] all-reduce(p), to_apply=add_{t}", None),
    "all_reduce_max_groups": ("ROOT r = {t}[4,6] all-reduce(p), replica_groups={{0,2},{1,3}}, to_apply=max_{t}", 4),
    "all_reduce_iota_transposed": (
        "ROOT r = {t}[4,6] all-reduce(p), replica_groups=[2,2]<=[2,2]T(1,0), to_apply=add_{t}", 4),
    "all_reduce_iota_8": ("ROOT r = {t}[4,6] all-reduce(p), replica_groups=[2,4]<=[4,2]T(1,0), to_apply=add_{t}", 8),
    "all_reduce_tuple": ("""
        q = {t}[4,6] multiply(p, p)
        ROOT r = ({t}[4,6], {t}[4,6]) all-reduce(p, q), replica_groups={{0,1},{2,3}}, to_apply=add_{t}""", 4),
    "all_reduce_async": ("""
        s = {t}[4,6] all-reduce-start(p), to_apply=add_{t}
        ROOT d = {t}[4,6] all-reduce-done(s)""", None),
    "all_gather_dim0": ("ROOT r = {t}[{n4},6] all-gather(p), dimensions={0}", None),
    "all_gather_dim1_groups": ("ROOT r = {t}[4,12] all-gather(p), replica_groups={{1,0},{3,2}}, dimensions={1}", 4),
    "all_gather_async": ("""
        s = ({t}[4,6], {t}[4,12]) all-gather-start(p), replica_groups={{0,1}}, dimensions={1}
        ROOT d = {t}[4,12] all-gather-done(s)""", 2),
    "reduce_scatter": ("ROOT r = {t}[4,3] reduce-scatter(p), replica_groups={{0,1}}, dimensions={1}, to_apply=add_{t}",
                       2),
    "reduce_scatter_4": ("ROOT r = {t}[1,6] reduce-scatter(p), dimensions={0}, to_apply=add_{t}", 4),
    "all_to_all_dim1": ("ROOT r = {t}[4,6] all-to-all(p), replica_groups={{0,1}}, dimensions={1}", 2),
    "all_to_all_dim0_4": ("ROOT r = {t}[4,6] all-to-all(p), replica_groups={{0,1,2,3}}, dimensions={0}", 4),
    "all_to_all_tuple": ("""
        q = {t}[4,6] negate(p)
        ROOT r = ({t}[4,6], {t}[4,6]) all-to-all(p, q), replica_groups={{1,0}}""", 2),
    "permute_cycle": ("ROOT r = {t}[4,6] collective-permute(p), source_target_pairs={{0,1},{1,2},{2,3},{3,0}}", 4),
    "permute_partial": ("ROOT r = {t}[4,6] collective-permute(p), source_target_pairs={{0,2},{3,1}}", 4),
    "permute_async": ("""
        s = ({t}[4,6], {t}[4,6]) collective-permute-start(p), source_target_pairs={{1,0},{0,1}}
        ROOT d = {t}[4,6] collective-permute-done(s)""", 2),
    "replica_id": ("""
        r = u32[] replica-id()
        c = {t}[] convert(r)
        b = {t}[4,6] broadcast(c), dimensions={}
        ROOT s = {t}[4,6] add(p, b)""", None),
}

#: cases with partitions: name -> (body, replicas, partitions)
_PARTITIONED = {
    "cross_replica_and_partition": ("ROOT r = {t}[4,6] all-reduce(p), channel_id=1, replica_groups={{0},{1}}, "
                                    "to_apply=add_{t}", 2, 2),
    "cross_replica_and_partition_gather": (
        "ROOT r = {t}[16,6] all-gather(p), channel_id=1, replica_groups={}, dimensions={0}", 2, 2),
    "flattened_ids": ("ROOT r = {t}[4,6] all-reduce(p), channel_id=1, replica_groups={{0,3},{1,2}}, "
                      "use_global_device_ids=true, to_apply=add_{t}", 2, 2),
    "flattened_ids_gather": ("ROOT r = {t}[8,6] all-gather(p), channel_id=2, replica_groups={{2,0},{1,3}}, "
                             "dimensions={0}, use_global_device_ids=true", 2, 2),
    "cross_replica_with_partitions": ("ROOT r = {t}[4,6] all-reduce(p), replica_groups={{0,1}}, to_apply=add_{t}",
                                      2, 2),
    "cross_partition_all_to_all": ("ROOT r = {t}[4,6] all-to-all(p), channel_id=3, replica_groups={{0,1}}, "
                                   "dimensions={1}", 2, 2),
    "cross_partition_permute": ("ROOT r = {t}[4,6] collective-permute(p), channel_id=4, "
                                "source_target_pairs={{0,1}}", 2, 2),
}

#: whole modules: name -> (text with {t}, replicas)
_MODULES = {
    "all_reduce_in_a_while_loop": ("""HloModule m, replica_count=4
add {
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT r = {t}[] add(a, b)
}
cond {
  s = (s32[], {t}[4,6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], {t}[4,6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = {t}[4,6] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  y = {t}[4,6] all-reduce(x), replica_groups={{0,1},{2,3}}, to_apply=add
  z = {t}[4,6] collective-permute(y), source_target_pairs={{0,2},{2,0},{1,3},{3,1}}
  w = {t}[4,6] subtract(z, x)
  ROOT t = (s32[], {t}[4,6]) tuple(j, w)
}
ENTRY e {
  p = {t}[4,6] parameter(0)
  zero = s32[] constant(0)
  s = (s32[], {t}[4,6]) tuple(zero, p)
  l = (s32[], {t}[4,6]) while(s), condition=cond, body=body
  ROOT x = {t}[4,6] get-tuple-element(l), index=1
}
""", 4),
}

#: values above emulator.ops.collective.CHUNKED_ALL_REDUCE_BYTES (all-reduce: reduce-scatter in
#: uneven chunks, then all-gather): name -> (body, shape)
_LARGE = {
    "all_reduce_chunked": ("ROOT r = {t}[129,257] all-reduce(p), to_apply=add_{t}", (129, 257)),
    "all_reduce_chunked_groups": (
        "ROOT r = {t}[129,257] all-reduce(p), replica_groups=[2,{h}]<=[{h},2]T(1,0), to_apply=max_{t}", (129, 257)),
    "all_reduce_chunked_tuple": ("""
        q = {t}[129,257] multiply(p, p)
        ROOT r = ({t}[129,257], {t}[129,257]) all-reduce(p, q), to_apply=add_{t}""", (129, 257)),
    "reduce_scatter_large": ("ROOT r = {t}[{s},257] reduce-scatter(p), dimensions={0}, to_apply=add_{t}", (128, 257)),
}

#: XLA's mesh-axes replica groups (MeshAxesReplicaGroupListProto), which our HLO text does not
#: write (XLA prints `replica_groups=mesh['x'=2,'y'=4] {'y'}`): the case's text has
#: `replica_groups={}` and its proto gets the mesh form. jaxlib 0.10.2 ignores the mesh's
#: device_ids and iota_transform (its results are those of the plain iota mesh): test_groups.py
#: checks those two against NumPy. name ->
#: (body, devices, mesh axis sizes, device ids or (), iota (reshape, perm) or None, [(axis, pre, size)])
_MESH = {
    "mesh_axes_b": ("ROOT r = {t}[4,6] all-reduce(p), replica_groups={}, to_apply=add_{t}", 8, [2, 4], (), None,
                    [(1, None, None)]),
    "mesh_axes_a": ("ROOT r = {t}[8,6] all-gather(p), replica_groups={}, dimensions={0}", 8, [2, 4], (), None,
                    [(0, None, None)]),
    "mesh_axes_both": ("ROOT r = {t}[16,6] all-gather(p), replica_groups={}, dimensions={0}", 4,
                       [2, 2], (), None, [(1, None, None), (0, None, None)]),
    "mesh_sub_axis": ("ROOT r = {t}[4,6] all-reduce(p), replica_groups={}, to_apply=add_{t}", 8, [8], (), None,
                      [(0, 2, 2)]),
    "mesh_sub_axis_then_axis": ("ROOT r = {t}[16,6] all-gather(p), replica_groups={}, dimensions={0}", 8, [2, 4],
                                (), None, [(1, 2, 2), (0, None, None)]),
    "mesh_axis_then_sub_axis": ("ROOT r = {t}[16,6] all-gather(p), replica_groups={}, dimensions={0}", 8, [2, 4],
                                (), None, [(0, None, None), (1, 1, 2)]),
    "mesh_reduce_scatter": ("ROOT r = {t}[2,6] reduce-scatter(p), replica_groups={}, dimensions={0}, "
                            "to_apply=add_{t}", 4, [2, 2], (), None, [(1, None, None)]),
}


#: the mesh-axes form written in HLO text, as XLA prints it; XLA:CPU reads it with its own parser,
#: ours with hlo/text/mesh_groups.py. name -> (body, devices)
_MESH_TEXT = {
    "mesh_text_axis": ("ROOT r = {t}[4,6] all-reduce(p), replica_groups=mesh['x'=2,'y'=4] {'y'}, to_apply=add_{t}", 8),
    "mesh_text_two_axes": ("ROOT r = {t}[16,6] all-gather(p), replica_groups=mesh['x'=2,'y'=2] {'y','x'}, "
                           "dimensions={0}", 4),
    "mesh_text_sub_axis": ("ROOT r = {t}[4,6] all-reduce(p), replica_groups=mesh['x'=8] {'x':(2)2}, "
                           "to_apply=add_{t}", 8),
    "mesh_text_reduce_scatter": ("ROOT r = {t}[2,6] reduce-scatter(p), replica_groups=mesh['a'=2,'b'=2] {'a'}, "
                                 "dimensions={0}, to_apply=add_{t}", 4),
    "mesh_text_all_to_all": ("ROOT r = {t}[4,6] all-to-all(p), replica_groups=mesh['x'=2,'y'=4] {'x'}, "
                             "dimensions={0}", 8),
}


def _mesh_proto(text: str, sizes, ids, iota, axes) -> bytes:
    """The module of `text` with its collective's replica groups given in the mesh-axes form."""
    from hlo.schema import hlo_pb2

    proto = hlo_pb2.HloModuleProto.FromString(hlo.load(text).to_bytes())
    (inst,) = [i for c in proto.computations for i in c.instructions
               if i.opcode in ("all-reduce", "all-gather", "reduce-scatter")]
    inst.ClearField("collective_device_list")
    del inst.replica_groups[:]
    rg = inst.mesh_axes_replica_group_list
    for k, size in enumerate(sizes):
        rg.mesh.axes.add(name="xyz"[k], size=size)
    rg.mesh.device_ids.extend(ids)
    if iota:
        rg.mesh.iota_transform.reshape_dims.extend(iota[0])
        rg.mesh.iota_transform.transpose_perm.extend(iota[1])
    for axis, pre, size in axes:
        ref = rg.axes.add(mesh_axis_index=axis)
        if pre is not None:
            ref.sub_axis_info.pre_size, ref.sub_axis_info.size = pre, size
    return proto.SerializeToString()


_TYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "s32": np.int32}


def _inputs(t: str, n: int, seed: int, shape: tuple[int, ...] = (4, 6)) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    if t == "s32":
        return [[rng.integers(-1000, 1000, shape).astype(np.int32)] for _ in range(n)]
    return [[rng.standard_normal(shape).astype(np.float32).astype(_TYPES[t])] for _ in range(n)]


def _cases() -> dict[str, dict]:
    cases = {}
    for name, (body, fixed) in _BODIES.items():
        for n in ([fixed] if fixed else [2, 4, 8]):
            for t in ("f32", "bf16", "s32"):
                text = _module(body.replace("{n4}", str(4 * n)), t, n)
                cases[f"{name}-{n}-{t}"] = {"hlo": text, "replicas": n, "partitions": 1, "t": t}
    for name, (body, nr, npart) in _PARTITIONED.items():
        for t in ("f32", "s32"):
            cases[f"{name}-{nr}x{npart}-{t}"] = {"hlo": _module(body, t, nr, npart), "replicas": nr,
                                                 "partitions": npart, "t": t}
    for name, (body, shape) in _LARGE.items():
        for n in (2, 4, 8):
            for t in ("f32", "bf16", "s32"):
                dims = ",".join(map(str, shape))
                text = _module(body.replace("{h}", str(n // 2)).replace("{s}", str(shape[0] // n)), t, n,
                               params=f"p = {{t}}[{dims}] parameter(0)")
                cases[f"{name}-{n}-{t}"] = {"hlo": text, "replicas": n, "partitions": 1, "t": t, "shape": shape}
    for name, (body, n, sizes, ids, iota, axes) in _MESH.items():
        for t in ("f32", "s32"):
            text = _module(body, t, n)
            cases[f"{name}-{n}-{t}"] = {"hlo": text, "replicas": n, "partitions": 1, "t": t,
                                        "proto": _mesh_proto(text, sizes, ids, iota, axes)}
    for name, (body, n) in _MESH_TEXT.items():
        for t in ("f32", "s32"):
            cases[f"{name}-{n}-{t}"] = {"hlo": _module(body, t, n), "replicas": n, "partitions": 1, "t": t,
                                        "xla_text": True}
    for name, (text, n) in _MODULES.items():
        for t in ("f32", "s32"):
            cases[f"{name}-{n}-{t}"] = {"hlo": text.replace("{t}", t), "replicas": n, "partitions": 1, "t": t}
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def xla_results(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """Every case run on XLA:CPU in one subprocess: (directory of results, name -> error text)."""
    d = tmp_path_factory.mktemp("xla_collectives")
    spec = []
    for k, (name, case) in enumerate(sorted(CASES.items())):
        path = d / f"in-{name}.npz"
        save_arrays(str(path), _inputs(case["t"], case["replicas"] * case["partitions"], k,
                                       case.get("shape", (4, 6))))
        spec.append({"name": name, "hlo": case["hlo"], "replicas": case["replicas"],
                     "partitions": case["partitions"], "inputs": str(path)})
        if case.get("xla_text"):
            spec[-1]["xla_text"] = True
        if "proto" in case:
            (d / f"{name}.pb").write_bytes(case["proto"])
            spec[-1]["proto"] = str(d / f"{name}.pb")
    (d / "spec.json").write_text(json.dumps(spec))
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    subprocess.run([sys.executable, "-m", "tests.emulator.collectives.xla_cpu_devices", str(d / "spec.json"), str(d)],
                   env=env, cwd=str(ROOT), check=True, timeout=600, capture_output=True)
    return d, json.loads((d / "report.json").read_text())


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_xla_cpu(name, xla_results):
    d, report = xla_results
    assert report[name] == "", f"XLA:CPU refused the case: {report[name]}"
    case = CASES[name]
    inputs = load_arrays(str(d / f"in-{name}.npz"))
    expected = load_arrays(str(d / f"{name}.npz"))
    exe = compile_proto(case.get("proto") or hlo.load(case["hlo"]).to_bytes())
    ours = run_devices(exe, inputs, case["replicas"], case["partitions"], timeout_s=60)
    assert len(ours) == len(expected)
    for dev, (got, want) in enumerate(zip(ours, expected)):
        assert len(got) == len(want)
        for k, (a, b) in enumerate(zip(got, want)):
            assert a.dtype == b.dtype and a.shape == b.shape, (dev, k)
            assert a.tobytes() == b.tobytes(), f"device {dev} output {k}:\nours {a}\nXLA:CPU {b}"
