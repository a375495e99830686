"""The torch_xla adapter: run torch_xla lazy graphs on the emulator (`mark_step`, `to_cpu`), the
`torch.compile` backend named "neuron" (registered when this package is imported), and NKI kernels
and C++ custom ops on XLA tensors as Neuron custom-calls (`custom_call`), and `differentiable`,
which pairs a function calling kernels with a backward of your own.

One of the two places (with neuron_customcall.jax) allowed to import torch and torch_xla."""
from neuron_customcall.torch_xla import custom_call
from neuron_customcall.torch_xla.differentiable import Saved, differentiable
from neuron_customcall.torch_xla.dynamo import neuron_backend
from neuron_customcall.torch_xla.lazy import compile_graph, live_tensors, mark_step, to_cpu

__all__ = ["Saved", "compile_graph", "custom_call", "differentiable", "live_tensors", "mark_step",
           "neuron_backend", "to_cpu"]
