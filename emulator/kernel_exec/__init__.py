"""The kernel executor: runs kernel IR on NumPy arrays with the SPMD grid and independent
``affine_range`` iterations as batch axes of single NumPy operations.

* ``runner``: storage, reads and writes, loops (vectorised or, with a logged reason, sequential)
* ``access``: affine accesses as strided views
* ``vectorise``: when a loop may run as a batch axis
* ``handlers``: the instruction table, one module per engine
* ``alu``: NumPy implementations of ALU operators and activation functions
"""

from .errors import KernelRuntimeError, OutOfBoundsAccessError
from .runner import Runner, run_kernel

__all__ = ["KernelRuntimeError", "OutOfBoundsAccessError", "Runner", "run_kernel"]
