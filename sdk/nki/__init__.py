"""The standalone ``nki`` package's import name (NKI beta 2): ``nki.language``, ``nki.jit``, ... are
neuron_customcall.nki's modules; ``nki.isa`` is the beta-2 ISA (instructions write into ``dst``)."""
from neuron_customcall.sdk_names import alias_package

alias_package(__name__, "neuron_customcall.nki", {"isa": "neuron_customcall.nki.isa.beta2"})
