"""JAX's entry point for the neuron device (`jax_plugins` group in pyproject.toml).

JAX imports this module while discovering plugins and calls `initialize()`, which registers the
plugin library under the platform name "neuron". `JAX_PLATFORMS=cpu` keeps JAX off it, as for a GPU
plugin; with the variable unset, neuron becomes JAX's default backend (priority above CPU) and
XLA:CPU stays reachable as `jax.devices("cpu")`.

After `jax.distributed.initialize`, JAX creates the client with `num_nodes`/`node_id` (the
plugin's world: pjrt/world.py) and passes its coordination service's key-value store as the
kv_get/kv_put/kv_try_get callbacks of PJRT_Client_Create; the processes' gloo group meets there
(neuron_customcall/distributed/kv_store.py), with no address or port of the plugin's own.
"""
from __future__ import annotations

PLATFORM = "neuron"
#: above XLA:CPU's (0), below the TPU/GPU defaults: neuron is the default device when installed
PRIORITY = 300


def initialize() -> None:
    """Registers the plugin with JAX (builds the library first if it is missing or stale)."""
    from jax._src import xla_bridge

    from neuron_customcall.pjrt.build import library_path

    xla_bridge.register_plugin(PLATFORM, priority=PRIORITY, library_path=library_path())
