"""``torch_neuronx.xla_impl.custom_op``: ``load`` and ``load_library`` of neuron_customcall.custom_op."""
from neuron_customcall.custom_op import *  # noqa: F401,F403
from neuron_customcall.custom_op import __all__  # noqa: F401
