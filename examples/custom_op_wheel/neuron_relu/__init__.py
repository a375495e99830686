"""neuron_relu: a ReLU custom operator for the NeuronCore GpSimd engine, installed from a wheel.

    import neuron_relu
    y = neuron_relu.relu(x)          # differentiable; torch.compile traces it

Importing the package loads the C++ library the wheel carries (``libneuron_relu.so``), which
registers ``torch.ops.neuron_relu.relu_forward`` and ``relu_backward`` with a CPU kernel (the
emulated GpSimd engine) and a Meta/fake kernel (the C++ shape function).
"""
from __future__ import annotations

from neuron_relu._library import LIBRARY_PATH, load
from neuron_relu.autograd import ReLU, relu

__all__ = ["LIBRARY_PATH", "ReLU", "relu"]
__version__ = "0.1.0"

load()
