"""The plugin under the frameworks' threads, with crashing kernels, and with what it refuses:
the process survives and the error names the cause."""
from __future__ import annotations

from textwrap import dedent

from tests.neuron_customcall.pjrt._proc import run_json

GPSIMD_TEST_KERNELS = """
sys.path.insert(0, "tests/emulator/gpsimd")
from gpsimd_kernels import library
from neuron_customcall.cpp import loader
from neuron_customcall.jax import cpp_call
loader.load(library("error_ops"))
"""


def test_concurrent_executes_from_threads_on_both_cores():
    got = run_json("""
        import threading
        f = jax.jit(lambda x, w: jnp.tanh(x @ w).sum(axis=1))
        rng = np.random.default_rng(0)
        jobs = []
        for k in range(8):
            x = rng.standard_normal((128, 64)).astype(np.float32)
            w = rng.standard_normal((64, 64)).astype(np.float32)
            jobs.append((x, w, NEURON[k % 2]))
        results, errors = [None] * len(jobs), []
        def work(k):
            try:
                x, w, d = jobs[k]
                for _ in range(5):
                    out = f(jax.device_put(x, d), jax.device_put(w, d))
                results[k] = (np.asarray(out), repr(next(iter(out.devices()))))
            except Exception as e:  # reported below
                errors.append(repr(e))
        threads = [threading.Thread(target=work, args=(k,)) for k in range(len(jobs))]
        for t in threads: t.start()
        for t in threads: t.join(timeout=300)
        errs = [float(np.max(np.abs(r[0] - np.asarray(on_cpu(lambda x, w: jnp.tanh(x @ w).sum(axis=1), x, w)))))
                for r, (x, w, d) in zip(results, jobs)]
        report(errors=errors, alive=[t.is_alive() for t in threads], devices=[r[1] for r in results],
               max_err=max(errs))
    """)
    assert got["errors"] == [] and not any(got["alive"])
    assert got["devices"] == ["NeuronDevice(id=0)", "NeuronDevice(id=1)"] * 4
    assert got["max_err"] < 1e-4


def test_a_crashing_kernel_is_an_error_and_the_process_goes_on():
    got = run_json(GPSIMD_TEST_KERNELS + dedent("""
        x = np.arange(16, dtype=np.float32)
        try:
            jax.jit(lambda t: cpp_call("error_ops::segfault", t) * 2)(x).block_until_ready()
            message = None
        except Exception as e:
            message = f"{type(e).__name__}: {e}"
        after = np.asarray(jax.jit(lambda t: t + 1)(x)).tolist()
        report(message=message, after=after)
    """))
    assert got["message"] is not None
    assert "op 'segfault'" in got["message"] and "SIGSEGV" in got["message"], got["message"]
    # the user's line (the jitted lambda in this script), not the library's cpp_call
    assert "failed on the neuron device" in got["message"] and "(at <string>:" in got["message"], got["message"]
    assert got["after"] == list(range(1, 17))


def test_kernel_errors_inside_threads_are_reported_to_each_caller():
    got = run_json(GPSIMD_TEST_KERNELS + dedent("""
        import threading
        x = np.arange(16, dtype=np.float32)
        bad = jax.jit(lambda t: cpp_call("error_ops::oob_element", t))
        good = jax.jit(lambda t: t * 3)
        out = {}
        def work(k):
            try:
                out[k] = np.asarray((bad if k % 2 else good)(jax.device_put(x, NEURON[k % 2]))).tolist()
            except Exception as e:
                out[k] = str(e)
        threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
        for t in threads: t.start()
        for t in threads: t.join(timeout=300)
        report(out=[out.get(k) for k in range(6)], alive=any(t.is_alive() for t in threads))
    """))
    assert not got["alive"]
    for k, value in enumerate(got["out"]):
        if k % 2:
            assert isinstance(value, str) and "op 'oob_element'" in value and "out of range" in value, value
        else:
            assert value == [3.0 * i for i in range(16)]


def test_jax_platforms_cpu_turns_the_plugin_off_and_unset_makes_it_the_default():
    off = run_json("report(platforms=sorted({d.platform for d in jax.devices()}), default=jax.default_backend())",
                   platforms="cpu")
    on = run_json("report(default=jax.default_backend(), cpu=jax.devices('cpu')[0].platform)", platforms=None)
    assert off == {"platforms": ["cpu"], "default": "cpu"}
    assert on == {"default": "neuron", "cpu": "cpu"}
