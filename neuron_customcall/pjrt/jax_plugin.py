"""JAX's entry point for the neuron device (`jax_plugins` group in pyproject.toml).

JAX imports this module while discovering plugins and calls `initialize()`, which registers the
plugin library under the platform name "neuron". `JAX_PLATFORMS=cpu` keeps JAX off it, as for a GPU
plugin; with the variable unset, neuron becomes JAX's default backend (priority above CPU) and
XLA:CPU stays reachable as `jax.devices("cpu")`.

After `jax.distributed.initialize`, JAX creates the client with `num_nodes`/`node_id` (the
plugin's world: pjrt/world.py) and the processes' collectives need a meeting point: unless
NEURON_RT_ROOT_COMM_ID names one, process 0 picks a free port on the coordinator's host and
publishes it in JAX's own key-value store, where the others read it (`_client_options`).
"""
from __future__ import annotations

import logging
import os
import socket

log = logging.getLogger(__name__)

PLATFORM = "neuron"
#: above XLA:CPU's (0), below the TPU/GPU defaults: neuron is the default device when installed
PRIORITY = 300
#: the key under which process 0 publishes NEURON_RT_ROOT_COMM_ID in JAX's key-value store
ROOT_COMM_KEY = "neuron_customcall/root_comm_id"


def initialize() -> None:
    """Registers the plugin with JAX (builds the library first if it is missing or stale)."""
    from jax._src import xla_bridge

    from neuron_customcall.pjrt.build import library_path

    xla_bridge.register_plugin(PLATFORM, priority=PRIORITY, library_path=library_path(), options=_client_options)


def _client_options() -> dict[str, object]:
    """Called by JAX as it creates the client: in a jax.distributed run of several processes,
    NEURON_RT_ROOT_COMM_ID agreed through JAX's key-value store. No options of our own."""
    from jax._src import distributed

    state = distributed.global_state
    if state.client is None or (state.num_processes or 1) < 2 or os.environ.get("NEURON_RT_ROOT_COMM_ID"):
        return {}
    if state.process_id == 0:
        host = (state.coordinator_address or "localhost").rpartition(":")[0] or "localhost"
        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        address = f"{host}:{port}"
        state.client.key_value_set(ROOT_COMM_KEY, address)
    else:
        from emulator.collectives.local import default_timeout

        timeout_ms = int(min(default_timeout(), 86400) * 1000)
        address = state.client.blocking_key_value_get(ROOT_COMM_KEY, timeout_ms)
    os.environ["NEURON_RT_ROOT_COMM_ID"] = address
    log.info("neuron device: process %d of %d meets the others at %s", state.process_id, state.num_processes,
             address)
    return {}
