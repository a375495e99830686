"""Errors raised by the `hlo` package.

Every reader in `hlo` turns malformed input into one of these, never a raw Python exception, so
that callers (the compiler, the command line) can report a file position and keep going.
"""
from __future__ import annotations

from typing import Optional

__all__ = ["HloError", "HloParseError"]


class HloError(Exception):
    """Base class of every error the `hlo` package raises on purpose."""


class HloParseError(HloError):
    """Malformed HLO input, with the position where reading stopped.

    Attributes exist so tools can point at the place (`line` and `column` are 1-based) and say what
    the reader wanted there (`expected`, may be empty) and what it saw (`found`, may be empty).
    """

    def __init__(
        self,
        message: str,
        *,
        filename: str = "<string>",
        line: int = 0,
        column: int = 0,
        expected: str = "",
        found: str = "",
    ) -> None:
        self.filename = filename
        self.line = line
        self.column = column
        self.expected = expected
        self.found = found
        self.detail = message
        super().__init__(self._render())

    def _render(self) -> str:
        where = f"{self.filename}:{self.line}:{self.column}: " if self.line else f"{self.filename}: "
        return where + self.detail
