"""The emulated GpSimd engine: eight general-purpose cores that run C++ custom-op kernels.

A custom-op library is built (by ``neuron_customcall.cpp``) against the device runtime in
``include/`` into one shared object; this package loads it only in an isolated worker process,
which reads its registration table, runs its shape functions (cached per signature on the host)
and runs its compute functions on 1 or 8 emulated cores with per-core TCM pools, bounds-checked
accessors and cost-model counters.
It never imports torch, jax or ``neuron_customcall``.
"""

from emulator.gpsimd.descriptor import LibraryDescriptor, OpDescriptor
from emulator.gpsimd.errors import (
    GpSimdError,
    KernelCrash,
    KernelError,
    KernelTimeout,
    LibraryError,
    ShapeFunctionCrash,
    ShapeFunctionError,
    ShapeFunctionTimeout,
)
from emulator.gpsimd import sandbox
from emulator.gpsimd.args import TensorSpec
from emulator.gpsimd.cost import CostEstimate, estimate
from emulator.gpsimd.library import HostLibrary
from emulator.gpsimd.runner import GpSimdRunner, RunResult

__all__ = [
    "CostEstimate",
    "GpSimdError",
    "GpSimdRunner",
    "HostLibrary",
    "KernelCrash",
    "KernelError",
    "KernelTimeout",
    "LibraryDescriptor",
    "LibraryError",
    "OpDescriptor",
    "RunResult",
    "ShapeFunctionCrash",
    "ShapeFunctionError",
    "ShapeFunctionTimeout",
    "TensorSpec",
    "estimate",
]
