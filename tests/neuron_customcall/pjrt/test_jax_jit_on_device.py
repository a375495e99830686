"""neuron_customcall.jax.jit with the neuron PJRT device present is jax.jit on it: one execution
path (issue 11). Checked in fresh processes with JAX_PLATFORMS=neuron,cpu: the direct path's
tracing and running are replaced by functions that fail, and the existing nj.jit tests run
through the plugin as they run through the direct path in the suite's own process."""
from __future__ import annotations

import os
import subprocess
import sys

from tests.neuron_customcall.pjrt._proc import ROOT, run_json


def test_nj_jit_is_jax_jit_on_the_first_neuroncore():
    got = run_json("""
        import importlib
        import neuron_customcall.jax as nj
        from tests.neuron_customcall.kernels.seed_kernels import nki_tensor_add
        jit_module = importlib.import_module("neuron_customcall.jax.jit")
        def refuse(*args, **kwargs):
            raise AssertionError("the direct path ran with the neuron device present")
        jit_module.NeuronJit._trace = jit_module.NeuronJit._run = refuse

        def f(a, b):
            return a * b * nki_tensor_add(a, b)
        a = np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32)
        b = np.random.default_rng(1).standard_normal((128, 512)).astype(np.float32)
        g = nj.jit(f)
        out = g(a, b)
        g(a + 1, b)
        with jax.default_device(NEURON[1]):
            other = nj.jit(lambda x: x + 1)(a)
        report(devices=[repr(d) for d in out.devices()], other=[repr(d) for d in other.devices()],
               err=float(np.max(np.abs(np.asarray(out) - a * b * (a + b)))), traces=g.trace_count,
               hlo="AwsNeuronCustomNativeKernel" in g.lower(a, b).as_text())
    """)
    assert got["devices"] == ["NeuronDevice(id=0)"] and got["other"] == ["NeuronDevice(id=1)"]
    assert got["err"] <= 1e-5 and got["traces"] == 1 and got["hlo"]


def test_compile_flags_keep_the_direct_path():
    got = run_json("""
        import neuron_customcall.jax as nj
        from neuron_customcall.jax.jit import plugin_device
        g = nj.jit(lambda x: x * 3, cache=False)
        out = g(np.arange(4, dtype=np.float32))
        report(plugin=repr(plugin_device()), value=np.asarray(out).tolist(), traces=g.trace_count)
    """)
    assert got == {"plugin": "NeuronDevice(id=0)", "value": [0.0, 3.0, 6.0, 9.0], "traces": 1}


def test_existing_nj_jit_tests_pass_through_the_plugin():
    env = {**os.environ, "JAX_PLATFORMS": "neuron,cpu",
           "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
                           "tests/neuron_customcall/jax/test_jax_jit.py", "tests/neuron_customcall/jax/test_nki_call.py"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "skipped" not in proc.stdout
