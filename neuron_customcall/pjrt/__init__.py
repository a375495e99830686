"""The "neuron" PJRT device: a PJRT C API plugin (native/, built by `build`) whose compile step is
our backend and whose execute step is our emulator (`service`), registered with JAX by `jax_plugin`.

    import jax
    jax.devices("neuron")                  # the NeuronCores (NEURON_RT_VISIBLE_CORES / NUM_CORES)
    jax.jit(f)(x)                          # runs on the emulated NeuronCore when neuron is the default

`library_path()` is the plugin library (PJRT_Api via GetPjrtApi) for any PJRT framework.
"""
from __future__ import annotations



def library_path() -> str:
    """The plugin library's path, built first if missing or stale (see `build`)."""
    from neuron_customcall.pjrt import build

    return build.library_path()
