"""The JAX adapter: `neuron_customcall.jax.jit` compiles jitted functions with our backend and runs
them on the emulated NeuronCore; `nki_call` (and `kernel[grid](jax_arrays)`) and `cpp_call` put
NKI kernels and C++ custom ops into JAX graphs as Neuron custom-calls; `xla_cpu` runs the same HLO
on XLA:CPU for comparison.

One of the two places (with neuron_customcall.torch_xla) allowed to import jax."""
from neuron_customcall.jax.cpp_call import cpp_call
from neuron_customcall.jax.jit import NeuronJit, jit
from neuron_customcall.jax.nki_call import nki_call

__all__ = ["NeuronJit", "cpp_call", "jit", "nki_call"]
