"""Top-level ``nki`` names of both generations that are thin over ``jit``: ``nki.simulate``
(beta 2), ``nki.trace`` and ``nki.tensor`` (beta 1), and ``FrameworkKernel`` (refused)."""

from __future__ import annotations

from typing import Any, Callable

from .jit import Kernel, Launch
from .tile import Tile
from .unsupported import refuse

#: Beta 1's ``nki.tensor``: the type of every tensor and tile a kernel handles.
tensor = Tile


def simulate(kernel: Any) -> Callable[..., Any]:
    """``nki.simulate(kernel)(*arrays)``: the kernel (an ``nki.jit`` kernel, a ``kernel[grid]``
    launch, or a plain function, wrapped) as a callable that runs it on the emulator and
    returns results as it was given them: NumPy arrays for NumPy arrays, torch tensors for
    torch CPU tensors (the launch's framework dispatch)."""
    if isinstance(kernel, Launch):
        return kernel
    return (kernel if isinstance(kernel, Kernel) else Kernel(kernel))[1]


def trace(func: Callable | None = None, **_options):
    """Beta 1's ``nki.trace``: a kernel decorator (kernels that write outputs passed as
    arguments, run with ``nki.simulate_kernel``); the same as ``nki.jit`` here."""
    if func is None:
        return lambda f: Kernel(f)
    return Kernel(func)


class FrameworkKernel:
    """Beta 1's base class for framework integrations (``dump_config`` of a backend_config);
    ours are the adapters of neuron_customcall.torch_xla / .jax, so it is refused by name."""

    #: Why it is refused (also what docs/nki-api.md says).
    unsupported = ("framework integration goes through neuron_customcall's torch_xla and JAX "
                   "adapters (nki.register_framework for others)")

    def __init__(self, *_args: Any, **_kwargs: Any):
        refuse("nki.FrameworkKernel", self.unsupported)
