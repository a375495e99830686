"""jax-neuronx's import name over neuron-customcall: ``nki_call`` of neuron_customcall.jax."""
from neuron_customcall.jax import nki_call  # noqa: F401

__all__ = ["nki_call"]
