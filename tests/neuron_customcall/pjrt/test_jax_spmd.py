"""SPMD programs (shard_map, jit with NamedSharding, pmap) on several emulated NeuronCores against
XLA:CPU with the same number of host devices (--xla_force_host_platform_device_count), each script
in a fresh process: the same function runs once on a mesh of NeuronCores and once on a mesh of CPU
devices, and the per-shard results are compared."""
from __future__ import annotations

from textwrap import dedent

import pytest

from tests.neuron_customcall.pjrt._proc import run_json
from tests.neuron_customcall.pjrt.test_robustness import GPSIMD_TEST_KERNELS

MESHES = """
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
CPUS = jax.devices("cpu")
def mesh(devs, shape, names):
    return Mesh(np.array(devs[:int(np.prod(shape))]).reshape(shape), names)
def on_both(make, *args):
    # make(devs) -> jitted function; the largest difference of its results, neuron against CPU,
    # and whether each result's shards sit on the devices (and have the shapes) XLA:CPU gives
    outs, layouts = [], []
    for devs in (NEURON, CPUS):
        got = make(devs)(*args)
        outs.append([np.asarray(a) for a in jax.tree.leaves(got)])
        layouts.append([sorted((devs.index(s.device), s.data.shape) for s in a.addressable_shards)
                        for a in jax.tree.leaves(got)])
    err = max(float(np.max(np.abs(a.astype(np.float64) - b))) if a.size else 0.0 for a, b in zip(*outs))
    return {"err": err, "layouts": layouts[0] == layouts[1], "shapes": [a.shape for a in outs[0]] ==
            [b.shape for b in outs[1]]}
def smap(body, in_specs, out_specs, shape=(2,), names=("x",)):
    return lambda devs: jax.jit(jax.shard_map(body, mesh=mesh(devs, shape, names), in_specs=in_specs,
                                              out_specs=out_specs, check_vma=False))
def named(fn, ins, outs, shape=(2,), names=("x",)):
    def make(devs):
        m = mesh(devs, shape, names)
        ns = lambda s: NamedSharding(m, s)
        return jax.jit(fn, in_shardings=tuple(ns(s) for s in ins),
                       out_shardings=jax.tree.map(ns, outs, is_leaf=lambda s: isinstance(s, P)))
    return make
"""


def _env(cores: int) -> dict[str, str]:
    return {"NEURON_RT_NUM_CORES": str(cores), "XLA_FLAGS": f"--xla_force_host_platform_device_count={cores}"}


def _check(got: dict, free: frozenset[str] = frozenset()) -> None:
    """`free`: cases that leave shardings to the compiler, where only the values must agree."""
    for name, r in got.items():
        assert r["shapes"] and (r["layouts"] or name in free), (name, r)
        assert r["err"] <= 2e-5, (name, r)  # float32: XLA:CPU's FMAs and tanh differ by ulps


@pytest.mark.parametrize("cores", [2, 4, 8])
def test_shard_map_collectives(cores):
    """Every lax collective in shard_map on 2, 4 and 8 emulated cores against XLA:CPU with as many
    host devices; the two-axis cases on a 2 x cores/2 mesh."""
    got = run_json(MESHES + dedent(f"""
        n = {cores}
        rng = np.random.default_rng(0)
        x = rng.standard_normal((8, 24)).astype(np.float32)
        ring = [(i, (i + 1) % n) for i in range(n)]
        cases = {{
            "psum": smap(lambda a: jax.lax.psum(a, "x"), P("x"), P(), (n,)),
            "pmax": smap(lambda a: jax.lax.pmax(a, "x"), P("x"), P(), (n,)),
            "all_gather": smap(lambda a: jax.lax.all_gather(a, "x", tiled=True) * 2, P("x"), P(), (n,)),
            "all_gather_stacked": smap(lambda a: jax.lax.all_gather(a, "x", axis=1), P(None, "x"),
                                       P(None, None, "x"), (n,)),
            "ppermute": smap(lambda a: jax.lax.ppermute(a, "x", ring), P("x"), P("x"), (n,)),
            "all_to_all": smap(lambda a: jax.lax.all_to_all(a, "x", 1, 0, tiled=True), P("x"), P("x"), (n,)),
            "psum_scatter": smap(lambda a: jax.lax.psum_scatter(a, "x", scatter_dimension=1, tiled=True),
                                 P("x"), P(None, "x"), (n,)),
            "axis_index": smap(lambda a: a + jax.lax.axis_index("x"), P("x"), P("x"), (n,)),
            # a 2 x n/2 mesh: collectives over one axis, results replicated over the other
            "mesh_2d": smap(lambda a: jax.lax.psum(a, "b") * jax.lax.axis_index("a"), P("a", "b"),
                            P("a", None), (2, n // 2), ("a", "b")),
            "mesh_2d_by_b": smap(lambda a: jax.lax.psum(a, "b"), P("b"), P(), (2, n // 2), ("a", "b")),
        }}
        report(**{{name: on_both(make, x) for name, make in cases.items()}})
    """), env=_env(cores))
    assert len(got) == 10
    _check(got)


def test_partially_manual_shard_map_and_sharding_constraints():
    got = run_json(MESHES + dedent("""
        x = np.arange(32, dtype=np.float32).reshape(4, 8)
        def make(devs):
            m = mesh(devs, (2, 2), ("x", "y"))
            inner = jax.shard_map(lambda a, b: (jax.lax.all_gather(a, "x", tiled=True)[:2] * 2, b.sum()),
                                  mesh=m, in_specs=(P("x"), P()), out_specs=(P("x"), P()), axis_names={"x"},
                                  check_vma=False)
            def f(a, b):
                u, v = inner(a, b)
                return jax.lax.with_sharding_constraint(u, NamedSharding(m, P("y"))) + 1, v
            return jax.jit(f)
        report(partial=on_both(make, x, x + 1))
    """), env=_env(4))
    _check(got, free=frozenset({"partial"}))


def test_jit_with_named_shardings():
    got = run_json(MESHES + dedent("""
        rng = np.random.default_rng(1)
        x = rng.standard_normal((8, 12)).astype(np.float32)
        w = rng.standard_normal((12, 4)).astype(np.float32)
        cases = {
            # transposed iota tile assignment in, partial replication (last_tile_dim_replicate) out
            "transposed": (named(lambda a, b: (jnp.tanh(a @ b), a.sum(0)), (P("b", "a"), P()), (P("a"), P("b")),
                                 (2, 2), ("a", "b")), (x, w)),
            "both_dims": (named(lambda a: a * 2 + 1, (P("a", "b"),), P("b", "a"), (2, 2), ("a", "b")), (x,)),
            "four_way": (named(lambda a, b: jnp.tanh(a @ b), (P("x"), P(None, "x")), P(None, "x"), (4,)), (x, w)),
            "replicated_out": (named(lambda a: (a ** 2).sum(), (P("x"),), P(), (4,)), (x,)),
            "int": (named(lambda a: (a * 3) // 2, (P(None, "x"),), P("x"), (4,)),
                    (np.arange(96, dtype=np.int32).reshape(8, 12),)),
        }
        # meshes whose devices are not the first cores in order: shardings name logical ids
        shuffled = lambda make: lambda devs: make([devs[3], devs[1], devs[2], devs[0]])
        cases["shuffled_mesh"] = (shuffled(named(lambda a: a * 2 + jnp.sum(a), (P("x"),), P(None, "x"), (4,))), (x,))
        cases["shuffled_ring"] = (shuffled(smap(lambda a: jax.lax.ppermute(a, "x", [(0, 1), (1, 2), (2, 3), (3, 0)])
                                                + jax.lax.axis_index("x"), P("x"), P("x"), (4,))), (x,))
        cases["last_two_cores"] = (lambda devs: named(lambda a: a.T @ a, (P("x"),), P("x"), (2,))(devs[2:]), (x,))
        out = {name: on_both(make, *args) for name, (make, args) in cases.items()}
        # unspecified shardings: the compiler's choice (replicated here), read back by JAX
        free = jax.jit(lambda a: a.T @ a)
        out["unspecified"] = on_both(
            lambda devs: lambda a: free(jax.device_put(a, NamedSharding(mesh(devs, (4,), ("x",)), P("x")))), x)
        report(**out)
    """), env=_env(4))
    _check(got, free=frozenset({"unspecified"}))


def test_jit_with_named_shardings_on_8_cores_for_each_collective_xla_emits():
    """jax.jit with NamedSharding on 8 cores, cases for each kind of collective XLA's SPMD
    partitioner emits for them (the cases' XLA:CPU executables are read to prove it: together they
    hold all-reduce, all-gather, all-to-all and collective-permute); ours partitions its own way
    (docs/pjrt.md), and the values and shard layouts must equal XLA:CPU's."""
    got = run_json(MESHES + dedent(r"""
        import re
        rng = np.random.default_rng(3)
        a = rng.standard_normal((16, 24)).astype(np.float32)
        b = rng.standard_normal((24, 16)).astype(np.float32)
        cases = {
            # contraction over the sharded dimension: partial sums all-reduced
            "all_reduce": (named(lambda u, v: u @ v, (P(None, "x"), P("x")), P(), (8,)), (a, b)),
            # the same, the result left sharded (a reduce-scatter where the backend makes one)
            "contraction_sharded_out": (named(lambda u, v: u @ v, (P(None, "x"), P("x")), P("x"), (8,)), (a, b)),
            # a sharded value wanted whole
            "all_gather": (named(lambda u: jnp.tanh(u) * 2, (P("x"),), P(), (8,)), (a,)),
            # resharding from rows to columns
            "all_to_all": (named(lambda u: u * 2 + 1, (P("x", None),), P(None, "x"), (8,)), (a,)),
            # a shift along the sharded dimension: each shard's edge from its neighbour
            "collective_permute": (named(lambda u: jnp.roll(u, 1, axis=0) - u, (P("x"),), P("x"), (8,)), (a,)),
            "stencil": (named(lambda u: u[1:] - u[:-1], (P("x"),), P(), (8,)), (a,)),
            # a 2 x 4 mesh: rows over "a", the contraction over "b"
            "mesh_2x4": (named(lambda u, v: jnp.tanh(u @ v), (P("a", "b"), P("b", None)), P("a"), (2, 4),
                               ("a", "b")), (a, b)),
            "reductions": (named(lambda u: (u.sum(0), jnp.argmax(u, axis=0), jnp.cumsum(u, axis=0)), (P("x"),),
                                 (P(), P(), P("x")), (8,)), (a,)),
            "int": (named(lambda u: (u * 3) // 2 + u.sum(), (P(None, "x"),), P("x"), (8,)),
                    (np.arange(16 * 24, dtype=np.int32).reshape(16, 24),)),
        }
        out = {name: on_both(make, *args) for name, (make, args) in cases.items()}
        kinds = set()
        for name, (make, args) in cases.items():
            text = make(CPUS).lower(*args).compile().as_text()
            kinds |= set(re.findall(r" (all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute)"
                                    r"(?:-start)?\(", text))
        report(cases=out, kinds=sorted(kinds), cores=len(NEURON))
    """), env=_env(8))
    assert got["cores"] == 8
    # XLA:CPU keeps a sharded contraction's reduction an all-reduce (it creates no reduce-scatter)
    assert got["kinds"] == ["all-gather", "all-reduce", "all-to-all", "collective-permute"], got["kinds"]
    _check(got["cases"])


@pytest.mark.parametrize("cores", [2, 4, 8])
def test_sharded_mlp_training_step(cores):
    got = run_json(MESHES + dedent("""
        cores = len(NEURON)
        rng = np.random.default_rng(2)
        x = rng.standard_normal((32, 16)).astype(np.float32)
        y = rng.standard_normal((32, 4)).astype(np.float32)
        params = [rng.standard_normal(s).astype(np.float32) * 0.3 for s in [(16, 32), (32,), (32, 4), (4,)]]
        def loss(p, x, y):
            h = jnp.tanh(x @ p[0] + p[1])
            return jnp.mean((h @ p[2] + p[3] - y) ** 2)
        def step(p, x, y):
            l, g = jax.value_and_grad(loss)(p, x, y)
            return [w - 0.1 * gw for w, gw in zip(p, g)], l
        # data parallel over "data", the hidden layer split over "model" when there are 4 or more
        shape, names = ((cores // 2, 2), ("data", "model")) if cores >= 4 else ((cores,), ("data",))
        model = "model" if cores >= 4 else None
        pspec = [P(None, model), P(model), P(model, None), P()]
        def make(devs):
            m = mesh(devs, shape, names)
            ns = lambda s: NamedSharding(m, s)
            f = jax.jit(step, in_shardings=([ns(s) for s in pspec], ns(P("data")), ns(P("data"))),
                        out_shardings=([ns(s) for s in pspec], ns(P())))
            def three_steps(p, x, y):
                for _ in range(3):
                    p, l = f(p, x, y)
                return p, l
            return three_steps
        report(mlp=on_both(make, params, x, y), cores=cores)
    """), env=_env(cores))
    assert got.pop("cores") == cores
    _check(got)


def test_pmap_psum_on_two_cores_and_one_device_meshes():
    got = run_json(MESHES + dedent("""
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        def make(devs):
            return jax.pmap(lambda t: (jax.lax.psum(t, "i"), t * jax.lax.axis_index("i")), axis_name="i",
                            devices=devs[:2])
        # one partition, still holding the sharding custom-calls (shard_map, sharding constraint)
        one = smap(lambda a: jax.lax.psum(a, "x") * 2, P("x"), P("x"), (1,))
        def constrained(devs):
            m = mesh(devs, (1,), ("x",))
            return jax.jit(lambda a: jax.lax.with_sharding_constraint(a * 3, NamedSharding(m, P("x"))))
        report(pmap=on_both(make, x), one_device=on_both(one, x), constraint=on_both(constrained, x))
    """), env=_env(2))
    _check(got)


def test_a_failure_on_one_partition_is_an_error_naming_it_not_a_hang():
    got = run_json(MESHES + GPSIMD_TEST_KERNELS + dedent("""
        m = mesh(NEURON, (2,), ("x",))
        def body(a):
            # partition 1 crashes in its kernel; partition 0 waits for it in the psum
            a = jax.lax.cond(jax.lax.axis_index("x") == 1, lambda t: cpp_call("error_ops::segfault", t),
                             lambda t: t, a)
            return jax.lax.psum(a, "x")
        f = jax.jit(jax.shard_map(body, mesh=m, in_specs=P("x"), out_specs=P(), check_vma=False))
        try:
            f(np.arange(32, dtype=np.float32)).block_until_ready()
            message = None
        except Exception as e:
            message = f"{type(e).__name__}: {e}"
        after = np.asarray(jax.jit(lambda t: t + 1)(np.arange(4.0, dtype=np.float32))).tolist()
        report(message=message, after=after)
    """), env=_env(2), timeout=300)
    message = got["message"]
    assert message is not None
    assert "partition 1" in message and "op 'segfault'" in message and "SIGSEGV" in message, message
    assert got["after"] == [1.0, 2.0, 3.0, 4.0]


def test_without_shardy_the_gspmd_forms_run():
    """jax_use_shardy_partitioner=False: shard_map lowers to GSPMD's Sharding /
    SPMDFullToShardShape / SPMDShardToFullShape custom-calls instead of Shardy's."""
    got = run_json("jax.config.update('jax_use_shardy_partitioner', False)\n" + MESHES + dedent("""
        x = np.arange(48, dtype=np.float32).reshape(4, 12)
        w = np.arange(24, dtype=np.float32).reshape(12, 2) / 10
        cases = {
            "psum_2x2": (smap(lambda a: jax.lax.psum(a, ("x", "y")), P("x", "y"), P(), (2, 2), ("x", "y")), (x,)),
            "all_gather": (smap(lambda a: jax.lax.all_gather(a, "x", tiled=True), P("x"), P(), (4,)), (x,)),
            "partial": (lambda devs: jax.jit(jax.shard_map(lambda a: jax.lax.psum(a, "x"), mesh=mesh(devs, (2, 2),
                        ("x", "y")), in_specs=P("x"), out_specs=P(), axis_names={"x"}, check_vma=False)), (x,)),
            "named": (named(lambda a, b: jnp.tanh(a @ b), (P("x", "y"), P("y")), P("x"), (2, 2), ("x", "y")), (x, w)),
            "pmap": (lambda devs: jax.pmap(lambda t: jax.lax.psum(t, "i"), axis_name="i", devices=devs[:4]), (x,)),
        }
        report(**{name: on_both(make, *args) for name, (make, args) in cases.items()})
    """), env=_env(4))
    _check(got, free=frozenset({"partial"}))
