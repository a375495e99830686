"""Programs JAX partitions itself: `jax.jit(shard_map(...))` on a 2x2 mesh (one replica, four
partitions: flattened-id groups, cross-partition permutes, tuple all-to-all) and `jax.pmap` on
four devices (jax 0.10 builds pmap on shard_map: four partitions too), compiled by XLA:CPU with 4 host devices in a subprocess. Our
backend compiles XLA's own per-device module text and run_devices runs it on the same per-device
inputs; every device's outputs must equal XLA:CPU's bit for bit."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import hlo
from emulator.collectives import run_devices
from tests.emulator.collectives.xla_cpu_devices import load_arrays
from tests.neuron_customcall.compiler.ours import compile_proto

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = r"""
import json, os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
os.environ["JAX_PLATFORMS"] = "cpu"
import jax, jax.numpy as jnp, numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from tests.emulator.collectives.xla_cpu_devices import save_arrays

out = sys.argv[1]
devs = sorted(jax.devices(), key=lambda d: d.id)
mesh = Mesh(np.array(devs).reshape(2, 2), ("x", "y"))

def body(a):
    s = lax.psum(a, "x")
    g = lax.all_gather(a, "y", tiled=True)
    p = lax.ppermute(a, "x", [(0, 1), (1, 0)])
    t = lax.all_to_all(a, "y", 0, 0, tiled=True)
    r = lax.psum_scatter(a, "y", scatter_dimension=0, tiled=True)
    m = lax.pmax(a, ("x", "y"))
    return s + p * lax.axis_index("y"), g, t, r, m

spec = P("x", "y")
f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=spec, check_vma=False,
                          out_specs=(spec, P("x", None), spec, spec, spec)))
x = jax.device_put(np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32), NamedSharding(mesh, spec))
texts = {"shard_map": f.lower(x).compile().as_text()}
def shards(arr):
    return [np.asarray(s.data) for s in sorted(arr.addressable_shards, key=lambda s: s.device.id)]
outs = f(x)
save_arrays(os.path.join(out, "shard_map-in.npz"), [[a] for a in shards(x)])
save_arrays(os.path.join(out, "shard_map-out.npz"), [list(o) for o in zip(*[shards(o) for o in outs])])

def per_replica(a):
    i = lax.axis_index("i")
    return (lax.psum(a, "i"), lax.all_gather(a, "i"), lax.ppermute(a, "i", [(k, (k + 1) % 4) for k in range(4)]),
            lax.psum_scatter(a, "i", scatter_dimension=0, tiled=True), a * i.astype(a.dtype))

g = jax.pmap(per_replica, axis_name="i", devices=devs)
y = np.random.default_rng(1).standard_normal((4, 8, 3)).astype(np.float32)
texts["pmap"] = g.lower(y).compile().as_text()
save_arrays(os.path.join(out, "pmap-in.npz"), [[y[k:k + 1]] for k in range(4)])  # pmap's programs keep a 1-dim
save_arrays(os.path.join(out, "pmap-out.npz"), [list(o) for o in zip(*[shards(o) for o in g(y)])])
json.dump(texts, open(os.path.join(out, "texts.json"), "w"))
"""


@pytest.fixture(scope="module")
def jax_programs(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    d = tmp_path_factory.mktemp("jax_collectives")
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(d)], env=env, cwd=str(ROOT), timeout=600,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return d, json.loads((d / "texts.json").read_text())


@pytest.mark.parametrize("name, replicas, partitions", [("shard_map", 1, 4), ("pmap", 1, 4)])
def test_xla_partitioned_programs_match_xla_cpu(jax_programs, name, replicas, partitions):
    d, texts = jax_programs
    text = texts[name]
    for opcode in ("all-reduce", "all-gather", "collective-permute", "reduce-scatter"):
        assert f" {opcode}(" in text
    exe = compile_proto(hlo.load(text).to_bytes())
    inputs, expected = load_arrays(str(d / f"{name}-in.npz")), load_arrays(str(d / f"{name}-out.npz"))
    ours = run_devices(exe, inputs, replicas, partitions, timeout_s=60)
    for dev, (got, want) in enumerate(zip(ours, expected)):
        assert len(got) == len(want)
        for k, (a, b) in enumerate(zip(got, want)):
            assert a.shape == b.shape and a.dtype == b.dtype, (dev, k)
            assert a.tobytes() == b.tobytes(), f"device {dev} output {k}:\nours {a}\nXLA:CPU {b}"
