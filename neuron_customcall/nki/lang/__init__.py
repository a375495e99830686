"""The implementation of ``nki.language``, one module per kind of operation; the public
namespace is ``neuron_customcall.nki.language``."""
