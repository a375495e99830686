"""``neuronxcc.nki`` (``.language``, ``.isa``, ...): the same modules as neuron_customcall.nki."""
from neuron_customcall.sdk_names import alias_package

alias_package(__name__, "neuron_customcall.nki")
