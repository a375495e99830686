"""jax.jit programs on the neuron PJRT device against XLA:CPU, in one fresh process each."""
from __future__ import annotations

from tests.neuron_customcall.pjrt._proc import run_json, run_script


def test_devices_and_default_backend():
    got = run_json("""
        report(devices=[repr(d) for d in jax.devices()], text=str(NEURON[1]), kinds=[d.device_kind for d in NEURON],
               platform=jax.default_backend(), ids=[d.id for d in NEURON], cpu=str(CPU),
               attrs=[d.core_on_chip for d in NEURON])
    """)
    assert got["platform"] == "neuron"
    assert got["devices"] == ["NeuronDevice(id=0)", "NeuronDevice(id=1)"]  # one trn1 chip by default
    assert got["text"] == "NeuronCore(id=1, core=1, kind=NC_v2)"
    assert got["kinds"] == ["NC_v2", "NC_v2"] and got["ids"] == [0, 1] and got["attrs"] == [0, 1]
    assert got["cpu"] == "cpu:0"


def test_visible_cores_and_num_cores_are_honoured():
    got = run_json("report(n=len(NEURON), hw=[d.local_hardware_id for d in NEURON])",
                   env={"NEURON_RT_VISIBLE_CORES": "1-3"})
    assert got == {"n": 3, "hw": [1, 2, 3]}
    got = run_json("report(n=len(NEURON))", env={"NEURON_RT_NUM_CORES": "4"})
    assert got == {"n": 4}


def test_programs_match_xla_cpu():
    got = run_json("""
        rng = np.random.default_rng(0)
        x = rng.standard_normal((64, 32)).astype(np.float32)
        w = rng.standard_normal((32, 16)).astype(np.float32)
        i = rng.integers(-50, 50, (7, 9)).astype(np.int32)
        programs = {
            "elementwise": (lambda x: jnp.exp(-x * x) * 3 + jnp.sin(x) / (1 + x ** 2), (x,)),
            "dot": (lambda x, w: jnp.tanh(x @ w), (x, w)),
            "reduce": (lambda x: (x.sum(0), x.max(1), jnp.mean(x), jnp.argmax(x, axis=1)), (x,)),
            "int": (lambda i: (i // 7 + i % 5, jnp.cumsum(i, axis=1)), (i,)),
            "while": (lambda x: jax.lax.fori_loop(0, 10, lambda k, c: c * 0.5 + jnp.cos(c) * 0.1 * k, x), (x,)),
            "bool": (lambda x: (x > 0.5, jnp.where(x > 0, x, -x)), (x,)),
        }
        out = {}
        for name, (f, args) in programs.items():
            mine = jax.jit(f)(*args)
            ref = on_cpu(f, *args)
            leaves, ref_leaves = jax.tree.leaves(mine), jax.tree.leaves(ref)
            out[name] = {
                "devices": sorted({repr(d) for l in leaves for d in l.devices()}),
                "dtypes": [str(l.dtype) for l in leaves] == [str(l.dtype) for l in ref_leaves],
                "err": max(float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))
                           if a.size else 0.0 for a, b in zip(leaves, ref_leaves)),
            }
        report(**out)
    """)
    for name, r in got.items():
        assert r["devices"] == ["NeuronDevice(id=0)"], name
        assert r["dtypes"], name
        assert r["err"] <= 1e-5, (name, r)  # a few float32 ulps (XLA:CPU's FMAs, transcendentals)


def test_grad_vmap_random_device_put_printing():
    got = run_json("""
        def loss(w, x):
            return jnp.mean((jnp.tanh(x @ w) - 0.5) ** 2)
        key = jax.random.PRNGKey(0)
        kw, kx = jax.random.split(key)
        w = jax.random.normal(kw, (8, 4))
        x = jax.random.normal(kx, (16, 8))
        g = jax.jit(jax.grad(loss))(w, x)
        g_ref = on_cpu(jax.grad(loss), w, x)
        v = jax.jit(jax.vmap(lambda a, b: a @ b))(jnp.ones((3, 4, 5)), jnp.ones((3, 5, 2)))
        y = jax.device_put(np.arange(6.0, dtype=np.float32), NEURON[1])
        z = jax.jit(lambda t: t * 2)(y)
        z.block_until_ready()
        text = str(jax.jit(lambda t: t + 1)(jnp.arange(3)))
        w_cpu = jax.random.normal(jax.device_put(kw, CPU), (8, 4))
        report(g_err=float(np.max(np.abs(np.asarray(g) - np.asarray(g_ref)))),
               random_err=float(np.max(np.abs(np.asarray(w) - np.asarray(w_cpu)))),
               random_dev=repr(next(iter(w.devices()))),
               v=np.asarray(v).tolist()[0][0], z=np.asarray(z).tolist(), z_dev=repr(next(iter(z.devices()))),
               text=text)
    """)
    assert got["g_err"] < 1e-6
    assert got["random_err"] < 1e-6 and got["random_dev"] == "NeuronDevice(id=0)"
    assert got["v"] == [5.0, 5.0]
    assert got["z"] == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0] and got["z_dev"] == "NeuronDevice(id=1)"
    assert got["text"] == "[1 2 3]"


def test_donated_arguments_are_consumed_as_on_xla_cpu():
    got = run_json("""
        f = jax.jit(lambda a, b: (a + b, b * 2), donate_argnums=0)
        a, b = jnp.ones(1000), jnp.arange(1000.0)
        out = f(a, b)
        report(a_deleted=a.is_deleted(), b_deleted=b.is_deleted(), out=float(out[0][3]))
    """)
    assert got == {"a_deleted": True, "b_deleted": False, "out": 4.0}


def test_each_core_executes_its_own_program():
    got = run_json("""
        f = jax.jit(lambda t: t * t + 1)
        outs = [f(jax.device_put(np.full(4, k + 1.0, np.float32), d)) for k, d in enumerate(NEURON)]
        report(values=[np.asarray(o).tolist() for o in outs], devs=[repr(next(iter(o.devices()))) for o in outs])
    """)
    assert got["values"] == [[2.0] * 4, [5.0] * 4]
    assert got["devs"] == ["NeuronDevice(id=0)", "NeuronDevice(id=1)"]


def test_what_jax_asks_of_a_compiled_program_and_a_device():
    got = run_json("""
        x = jnp.ones((64, 64))
        c = jax.jit(lambda t: jnp.tanh(t @ t)).lower(x).compile()
        m = c.memory_analysis()
        before = NEURON[0].memory_stats()["bytes_in_use"]
        y = c(x)
        after = NEURON[0].memory_stats()
        report(cost=c.cost_analysis(), args=m.argument_size_in_bytes, outs=m.output_size_in_bytes,
               text=c.as_text().splitlines()[0], grew=after["bytes_in_use"] - before,
               stat_keys=sorted(after), out_kind=y.sharding.memory_kind)
    """)
    assert got["cost"]["optimal_seconds"] > 0  # the cost model's trn1 estimate
    assert got["args"] == got["outs"] == 64 * 64 * 4
    assert got["text"].startswith("HloModule jit__lambda") and "{(f32[64,64]{1,0})->f32[64,64]{1,0}}" in got["text"]
    assert got["grew"] == 64 * 64 * 4
    assert "pool_bytes" not in got["stat_keys"] and "peak_bytes_in_use" in got["stat_keys"]
    assert got["out_kind"] == "device"


def test_compile_cache_and_debug_dumps_are_the_backends(tmp_path):
    script = """
        import logging
        logging.basicConfig(level=logging.INFO, format="%(message)s")
        out = jax.jit(lambda t: jnp.sin(t) * 2)(jnp.arange(8.0))
        report(value=float(out[3]))
    """
    env = {"NEURON_COMPILE_CACHE_URL": str(tmp_path / "cache"), "NEURON_FRAMEWORK_DEBUG": "1",
           "NEURON_FRAMEWORK_DEBUG_DIR": str(tmp_path / "dumps")}
    first = run_script(script, env=env)
    second = run_script(script, env=env)
    assert "Using a cached neff" not in first.stderr
    assert "Using a cached neff at " + str(tmp_path / "cache") in second.stderr
    dumps = sorted(p.suffix for p in (tmp_path / "dumps").iterdir())
    assert ".pbtxt" in dumps and ".txt" in dumps
