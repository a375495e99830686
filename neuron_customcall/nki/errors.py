"""Errors raised while tracing NKI kernels. Each names the kernel, the source file:line in the
kernel that caused it, and the rule that was broken."""

from __future__ import annotations

from emulator.kernel_ir.errors import KernelError


class NKIError(Exception):
    """Base class of every NKI front-end error."""


class KernelTraceError(KernelError, NKIError):
    """The kernel can not be traced: unsupported Python, wrong argument, non-affine index..."""


class HardwareRuleError(KernelTraceError):
    """The kernel breaks a NeuronCore hardware rule (tile sizes, memory locations, capacity)."""


class NonAffineIndexError(NKIError):
    """An index expression that is not affine in program ids, loop variables and aranges. Raised
    without kernel context by the index algebra and re-raised by the tracer with it."""


class UnsupportedAPIError(NKIError, NotImplementedError):
    """An API of NKI's reference that the emulator does not provide (it needs hardware, several
    NeuronCores, or is not implemented yet). The message names the API, and the kernel and line
    when raised while tracing; never an ``AttributeError``."""


class NkiValidationError(HardwareRuleError):
    """An ``nki.isa`` argument breaks a rule the ISA reference states for the instruction (shapes,
    dtypes, memories, enum values): ``nki.isa.NkiValidationError``, raised while tracing."""
