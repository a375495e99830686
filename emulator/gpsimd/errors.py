"""Exceptions of the emulated GpSimd engine; every one names the op (or library) it is about."""

from __future__ import annotations


class GpSimdError(RuntimeError):
    """Base class: something went wrong building, loading or running a GpSimd kernel."""


class UnknownNameError(GpSimdError, KeyError):
    """No loaded library or op has this name; the message lists the close names. A KeyError too,
    for callers that look names up, but printed as a sentence (KeyError's own str() quotes it)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def unknown_name(what: str, name: str, known: "list[str] | tuple[str, ...]", where: str = "") -> UnknownNameError:
    """An UnknownNameError for `name`, suggesting the known names closest to it."""
    import difflib

    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    listing = f" (known: {', '.join(sorted(known))})" if known and len(known) <= 12 else ""
    return UnknownNameError(f"no {what} {name!r}{where}{hint}{listing}")


class LibraryError(GpSimdError):
    """A built library breaks a rule (registration table, compute function lookup or signature)."""


class ShapeFunctionError(GpSimdError):
    """A shape function failed (for instance it tried to read input data); `kind` is the device
    error kind, "other" for a C++ exception, "crash" or "timeout"."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class KernelError(GpSimdError):
    """The kernel raised a device error: out-of-bounds access, TCM misuse, coherence, ..."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class KernelCrash(GpSimdError):
    """The kernel crashed its emulated core (segfault, abort); the host process is unharmed."""


class KernelTimeout(GpSimdError):
    """The kernel ran past its time limit and its worker was killed."""


class ShapeFunctionCrash(ShapeFunctionError, KernelCrash):
    """A shape function crashed its worker (segfault, abort); the host process is unharmed."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "crash")


class ShapeFunctionTimeout(ShapeFunctionError, KernelTimeout):
    """A shape function ran past its time limit and its worker was killed."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "timeout")
