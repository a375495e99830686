"""torch-neuronx's import name over neuron-customcall (sdk/pyproject.toml).

Importing it imports our torch_xla adapter, as the real package imports torch_xla: C++ custom ops
loaded through ``torch_neuronx.xla_impl.custom_op`` then take XLA tensors (their ``XLA`` kernel is
registered by the adapter), and NKI kernels run inside torch_xla graphs. It provides no
``torch_neuronx.xla`` and no ``libneuronxla``: torch_xla probes those at import to detect a
Trainium host and would then default to ``PJRT_DEVICE=NEURON``; without them the device stays
what the user asks for (``PJRT_DEVICE=NEURON`` for the emulated NeuronCore). ``nki_jit`` is
beta 1's decorator for NKI kernels called with torch tensors: ``nki.jit`` itself.
"""
import neuron_customcall.torch_xla  # noqa: F401  (registers the XLA kernels of C++ and NKI ops)
from torch_neuronx import xla_impl  # noqa: F401
from neuron_customcall.nki import jit as nki_jit  # noqa: F401  (beta 1's torch decorator)

__all__ = ["xla_impl", "nki_jit"]
