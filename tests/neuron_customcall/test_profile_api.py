"""neuron_customcall.profile: estimated trn1 time of a compiled graph from Python (what the
examples print), from a backend `Compiled`, an Executable or a .neff; seeded random inputs."""
from __future__ import annotations

import jax
import numpy as np

import hlo
from neuron_customcall.backend import compile_cached
from neuron_customcall.profile import estimated_seconds, profile, random_inputs


def test_estimated_seconds_of_a_compiled_mlp(tmp_path):
    def mlp(x, w):
        return jax.nn.relu(x @ w)

    args = [np.ones((32, 64), np.float32), np.ones((64, 16), np.float32)]
    proto = jax.jit(mlp).lower(*args).compiler_ir("hlo").as_serialized_hlo_module_proto()
    compiled = compile_cached(hlo.load(proto))
    seconds = estimated_seconds(compiled, args)
    assert 0 < seconds < 1e-3
    assert estimated_seconds(compiled.executable) == seconds  # shapes decide; data does not here
    neff = tmp_path / "m.neff"
    neff.write_bytes(compiled.artifact if isinstance(compiled.artifact, bytes) else compiled.artifact.read_bytes())
    prof = profile(neff)
    assert prof.total_seconds == seconds and prof.busy_cycles()["tensor"] > 0
    a, b = random_inputs(compiled.executable.manifest, seed=3), random_inputs(compiled.executable.manifest, seed=3)
    assert all(np.array_equal(x, y) and x.dtype == np.float32 for x, y in zip(a, b))
