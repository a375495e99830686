"""The JAX adapter: `neuron_customcall.jax.jit` compiles jitted functions with our backend and runs
them on the emulated NeuronCore; `xla_cpu` runs the same HLO on XLA:CPU for comparison.

One of the two places (with neuron_customcall.torch_xla) allowed to import jax."""
from neuron_customcall.jax.jit import NeuronJit, jit

__all__ = ["NeuronJit", "jit"]
