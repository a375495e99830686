"""NKI kernels with ``nki.collectives`` inside ``jax.shard_map`` on 2 and 4 emulated NeuronCores
of the neuron PJRT device (NEURON_RT_NUM_CORES), against the same program with ``lax.psum`` /
``lax.all_gather`` on XLA:CPU with as many host devices (issue 18). Each core runs the kernel
of its partition; the kernels' ranks are the partitions."""
from __future__ import annotations

from textwrap import dedent

import pytest

from tests.neuron_customcall.pjrt._proc import run_json
from tests.neuron_customcall.pjrt.test_jax_spmd import MESHES, _env

BODY = dedent("""
    from neuron_customcall import nki
    from neuron_customcall.nki import language as nl
    from neuron_customcall.nki import collectives as cc

    NCORES = int(os.environ["NEURON_RT_NUM_CORES"])
    EVERY = cc.ReplicaGroup([list(range(NCORES))])

    @nki.jit
    def summed(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        cc.all_reduce([a], [out], EVERY, nl.add)
        return out

    @nki.jit
    def gathered(a):
        out = nl.ndarray((NCORES * a.shape[0], a.shape[1]), dtype=a.dtype, buffer=nl.shared_hbm)
        cc.all_gather([a], [out], EVERY, 0)
        return out

    x = np.random.default_rng(1).standard_normal((8 * NCORES, 16)).astype(np.float32)
    ours_psum = smap(lambda a: summed(a) * 2, P("x"), P(), (NCORES,))(NEURON)(x)
    cpu_psum = smap(lambda a: jax.lax.psum(a, "x") * 2, P("x"), P(), (NCORES,))(CPUS)(x)
    ours_g = smap(lambda a: gathered(a) + 1, P("x"), P(), (NCORES,))(NEURON)(x)
    cpu_g = smap(lambda a: jax.lax.all_gather(a, "x", tiled=True) + 1, P("x"), P(), (NCORES,))(CPUS)(x)
    report(psum=float(np.max(np.abs(np.asarray(ours_psum) - np.asarray(cpu_psum)))),
           gather=float(np.max(np.abs(np.asarray(ours_g) - np.asarray(cpu_g)))),
           devices=len({str(s.device) for s in ours_psum.addressable_shards}))
""")


@pytest.mark.parametrize("cores", [2, 4])
def test_kernel_collectives_in_shard_map_match_lax_collectives_on_xla_cpu(cores):
    got = run_json(MESHES + BODY, env=_env(cores))
    assert got["devices"] == cores
    assert got["psum"] <= 2e-5 and got["gather"] == 0.0, got
