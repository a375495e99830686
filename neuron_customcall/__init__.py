"""neuron-customcall: Neuron custom operators (C++ for GpSimd, NKI kernels) as XLA custom-calls,
compiled with the rest of the graph into a NEFF-like artifact and run on an emulated NeuronCore."""

__version__ = "0.1.0"
