"""A jax.jit function's element-wise chains, compiled by our backend, run fused native code and
agree with XLA:CPU (jax.devices("cpu")) and, bit for bit, with the same program on NumPy."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from emulator import load_artifact  # noqa: E402
from emulator.native import policy  # noqa: E402
from neuron_customcall import backend  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


def _step(x, w, b, labels, lr):
    """A softmax-regression step's element-wise parts: bias add, a relu mask, a one-hot compare,
    the SGD update, converts."""
    h = x @ w + b
    mask = h > 0
    a = jnp.where(mask, h, 0.0)
    onehot = (labels[:, None] == jnp.arange(w.shape[1])[None, :]).astype(jnp.float32)
    grad = x.T @ ((a - onehot) * mask.astype(jnp.float32))
    w2 = w - lr * grad
    counts = (labels % 3 + labels * 7) ^ (labels & 5)
    return w2, -a / (a * a + 1.0), onehot.astype(jnp.int32) * counts[:, None], ~mask


def test_a_jitted_step_matches_xla_cpu_and_numpy(tmp_path, monkeypatch):
    base = tmp_path / "private"
    base.mkdir(mode=0o700)
    monkeypatch.setenv("NEURON_CUSTOMCALL_PRIVATE_DIR", str(base))
    rng = np.random.default_rng(0)
    args = (rng.standard_normal((16, 24)).astype(np.float32), rng.standard_normal((24, 10)).astype(np.float32),
            rng.standard_normal(10).astype(np.float32), rng.integers(0, 10, 16).astype(np.int32), np.float32(0.1))
    expected = jax.jit(_step)(*jax.device_put(args, jax.devices("cpu")[0]))
    hlo = jax.jit(_step).lower(*args).compiler_ir("hlo").as_serialized_hlo_module_proto()
    artifact = backend.compile_cached(hlo, cache=False).artifact
    monkeypatch.setenv(policy.MODE_ENV, "off")
    plain = load_artifact(artifact).run(list(args))
    monkeypatch.setenv(policy.MODE_ENV, "now")
    exe = load_artifact(artifact)
    assert exe.native and exe.native_regions >= 3
    fused = exe.run(list(args))
    for e, p, f in zip(expected, plain, fused):
        e = np.asarray(e)
        assert p.dtype == f.dtype == e.dtype and p.shape == f.shape == e.shape
        np.testing.assert_array_equal(p.view(np.uint8), f.view(np.uint8))
        if e.dtype.kind == "f":
            np.testing.assert_allclose(f, e, rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_array_equal(f, e)
