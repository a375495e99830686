"""The dynamic-padder pass with every handler registered: what the pipeline runs.

Why a module of its own: the pass's core (dynamic_padder.py: the Padder and its handler table)
and the handlers for control flow (dynamic_calls.py) and indexing ops (dynamic_indexing.py)
import the core; importing them here, after it, registers them without an import circle.
"""
from neuron_customcall.compiler import dynamic_calls, dynamic_indexing  # noqa: F401 - register handlers
from neuron_customcall.compiler.dynamic_padder import has_dynamic_shapes, pad_dynamic_shapes

__all__ = ["has_dynamic_shapes", "pad_dynamic_shapes"]
