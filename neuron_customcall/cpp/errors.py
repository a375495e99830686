"""Errors of the C++ custom-op front end."""

from __future__ import annotations

from emulator.gpsimd.errors import GpSimdError


class BuildError(GpSimdError):
    """A custom-op library could not be built: a bad argument or a compiler diagnostic."""
