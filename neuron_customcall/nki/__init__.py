"""NKI kernels on the emulated NeuronCore.

``jit`` kernels are traced into the kernel IR (emulator/kernel_ir) and run by the vectorised
kernel executor (emulator/kernel_exec). ``language`` (nl) and ``isa`` (nisa) are the kernel APIs;
``trace_kernel`` and ``register_framework`` are the hooks framework adapters use.
"""

from . import collectives, compiler, isa, language, typing
from .errors import (HardwareRuleError, KernelTraceError, NKIError, NonAffineIndexError,
                     UnsupportedAPIError)
from .jit import (Kernel, Launch, TensorSpec, TracedKernel, baremetal, benchmark, jit, profile,
                  register_framework, simulate_kernel, trace_kernel)
from .language import tile_size
from .sdk_api import FrameworkKernel, simulate, tensor, trace

__all__ = [
    "isa", "language", "tile_size", "jit", "simulate_kernel", "trace_kernel", "register_framework",
    "Kernel", "Launch", "TensorSpec", "TracedKernel", "benchmark", "baremetal", "profile",
    "NKIError", "KernelTraceError", "HardwareRuleError", "NonAffineIndexError",
    "UnsupportedAPIError", "collectives", "compiler", "typing", "simulate", "trace", "tensor", "FrameworkKernel",
]
