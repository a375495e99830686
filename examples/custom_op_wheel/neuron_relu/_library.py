"""Finding and loading the custom-op library bundled with this package.

The library sits next to this file (the wheel's build step put it there), so an installed
package needs no build tools and no source tree, only neuron-customcall to load it.
"""
from __future__ import annotations

import logging
from pathlib import Path

from neuron_customcall import custom_op

log = logging.getLogger(__name__)

#: NEURON_LIBRARY(neuron_relu, m) in csrc/relu_shape.cpp: the ops' torch namespace.
NAMESPACE = "neuron_relu"
LIBRARY_PATH = Path(__file__).resolve().parent / "libneuron_relu.so"


def load() -> None:
    """Registers torch.ops.neuron_relu.*; an error says how to get the library when it is missing
    (a source checkout that was never built)."""
    if not LIBRARY_PATH.is_file():
        raise ImportError(f"{LIBRARY_PATH} is missing: install neuron-relu from its wheel, or build "
                          "it in place with `python setup.py build_ext --inplace`")
    custom_op.load_library(LIBRARY_PATH)
    log.debug("loaded %s", LIBRARY_PATH)
