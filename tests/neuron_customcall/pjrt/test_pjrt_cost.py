"""What the neuron PJRT device reports about programs and devices, read through JAX's own API:
`compiled.cost_analysis()` (flops and transcendentals counted as XLA:CPU counts them, bytes
accessed, our cost model's time), executable names and fingerprints, and `memory_stats()`."""
from __future__ import annotations

import pytest

from tests.neuron_customcall.pjrt._proc import run_json

PROGRAMS = """
rng = np.random.default_rng(0)
x = rng.standard_normal((64, 32)).astype(np.float32)
w = rng.standard_normal((32, 16)).astype(np.float32)
img = rng.standard_normal((2, 3, 17, 12)).astype(np.float32)
ker = rng.standard_normal((4, 3, 3, 5)).astype(np.float32)
ker_g = rng.standard_normal((6, 1, 3, 5)).astype(np.float32)
conv = lambda **kw: (lambda a, k: jax.lax.conv_general_dilated(a, k, **kw))
programs = {
    "dot_tanh": (lambda x, w: jnp.tanh(x @ w), (x, w)),
    "elementwise": (lambda x: x * 2 + 1 - x / 3, (x,)),
    "transcendental": (lambda x: jnp.exp(x) * jnp.log1p(x * x) + jnp.sin(x), (x,)),
    "reduce": (lambda x: (x.sum(0), x.max(1)), (x,)),
    "argmax": (lambda x: jnp.argmax(x, 1), (x,)),
    "loop": (lambda x: jax.lax.fori_loop(0, 5, lambda i, c: c * 2.0 + 1.0, x), (x,)),
    "conv_same": (conv(window_strides=(1, 1), padding="SAME"), (img, ker)),
    "conv_strided_dilated": (conv(window_strides=(2, 1), padding=((1, 2), (0, 3)), rhs_dilation=(1, 2)),
                             (img, ker)),
    "conv_lhs_dilated": (conv(window_strides=(1, 1), padding=((1, 1), (2, 0)), lhs_dilation=(2, 3)), (img, ker)),
    "conv_groups": (conv(window_strides=(1, 1), padding="VALID", feature_group_count=3),
                    (img, ker_g)),
}
"""


@pytest.fixture(scope="module")
def costs() -> dict:
    return run_json(PROGRAMS + """
out = {}
for name, (f, args) in programs.items():
    mine = jax.jit(f).lower(*args).compile()
    ref = jax.jit(f).lower(*jax.device_put(args, CPU)).compile()
    out[name] = {"mine": mine.cost_analysis(), "ref": ref.cost_analysis(),
                 "fingerprint": mine.runtime_executable().fingerprint.decode(),
                 "name": mine.runtime_executable().hlo_modules()[0].name}
def step(w, x):
    return jax.grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w)
mine = jax.jit(step).lower(w, x).compile()
again = jax.jit(step).lower(w, x).compile()
out["grad"] = {"mine": mine.cost_analysis(), "ref": jax.jit(step).lower(*jax.device_put((w, x), CPU)).compile()
               .cost_analysis(), "fingerprint": mine.runtime_executable().fingerprint.decode(),
               "same_fingerprint": again.runtime_executable().fingerprint == mine.runtime_executable().fingerprint}
report(**out)
""")


EXACT = ["dot_tanh", "elementwise", "transcendental", "reduce", "argmax", "loop", "conv_same",
         "conv_strided_dilated", "conv_lhs_dilated", "conv_groups"]


@pytest.mark.parametrize("name", EXACT)
def test_flops_and_transcendentals_equal_xla_cpus(costs, name):
    mine, ref = costs[name]["mine"], costs[name]["ref"]
    assert mine["flops"] == ref.get("flops", 0.0), (name, mine, ref)
    assert mine["transcendentals"] == ref.get("transcendentals", 0.0), (name, mine, ref)


def test_cost_analysis_has_bytes_and_the_cost_models_time(costs):
    for name in EXACT:
        mine = costs[name]["mine"]
        assert mine["bytes accessed"] > 0 and mine["optimal_seconds"] > 0, (name, mine)
    # x (8 KiB) and w (2 KiB) are read, the 4 KiB result written, at the least
    assert costs["dot_tanh"]["mine"]["bytes accessed"] >= (64 * 32 + 32 * 16 + 64 * 16) * 4


def test_a_training_steps_flops_are_xla_cpus_up_to_its_simplifications(costs):
    mine, ref = costs["grad"]["mine"], costs["grad"]["ref"]
    assert mine["transcendentals"] == ref["transcendentals"]
    assert abs(mine["flops"] - ref["flops"]) <= 0.01 * ref["flops"]  # XLA folds a multiply by 1


def test_executables_have_names_and_stable_fingerprints(costs):
    assert costs["dot_tanh"]["name"] == "jit__lambda"
    assert len({costs[n]["fingerprint"] for n in EXACT}) == len(EXACT)
    assert costs["grad"]["same_fingerprint"]


def test_device_memory_stats_follow_buffers():
    got = run_json("""
        import gc
        dev = NEURON[0]
        base = dev.memory_stats()
        a = jax.device_put(np.ones((256, 256), np.float32), dev)
        held = dev.memory_stats()
        del a; gc.collect()
        report(base=base, held=held, after=dev.memory_stats())
    """)
    base, held, after = got["base"], got["held"], got["after"]
    assert held["bytes_in_use"] - base["bytes_in_use"] == 256 * 256 * 4
    assert after["bytes_in_use"] == base["bytes_in_use"]
    assert held["peak_bytes_in_use"] >= held["bytes_in_use"] and held["num_allocs"] >= 1
    assert held["bytes_limit"] == 16 << 30
