"""``nki.isa`` (nisa): one function per NeuronCore instruction, in both generations of NKI.

* ``neuron_customcall.nki.isa`` (this package) and ``neuronxcc.nki.isa`` are **beta 1**
  (``beta1.py``): instructions return new tiles and take ``mask=``/``dtype=``.
* ``nki.isa`` (the SDK's standalone ``nki`` package, ``sdk/nki``) is **beta 2** (``beta2.py``):
  every instruction takes ``dst`` first and writes into it.

Both are thin signatures over one emitter per instruction (``compute``, ``movement``,
``matmul``, ``accumulate``), which traces the kernel-IR instruction (its spec in
emulator/kernel_ir/instructions.py, its handler in emulator/kernel_exec/handlers) into a new tile
or into the ``dst`` view. ``constants`` is beta 1's ``nki.isa.constants``; ``enums`` holds both
generations' enums.
"""

from ..errors import NkiValidationError
from .beta1 import *  # noqa: F401,F403  (beta 1 is this package's namespace)
from .beta1 import __all__ as _beta1_all
from . import constants  # noqa: E402  (beta 1: nki.isa.constants)

__all__ = [*_beta1_all, "NkiValidationError"]
