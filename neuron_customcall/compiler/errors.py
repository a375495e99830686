"""The compiler's error: always names the opcode, instruction, computation and source location."""
from __future__ import annotations

from typing import Any


class CompileError(Exception):
    """An HLO module this compiler can not compile (unsupported op or attribute, bad shapes)."""

    def __init__(self, message: str, inst: Any = None) -> None:
        self.opcode = getattr(inst, "opcode", "")
        self.instruction = getattr(inst, "name", "")
        parent = getattr(inst, "parent", None)
        self.computation = getattr(parent, "name", "")
        try:
            self.source_location = inst.source_location if inst is not None else ""
        except Exception:  # noqa: BLE001 - a malformed metadata index must not hide the real error
            self.source_location = ""
        if inst is not None:
            where = f"{self.opcode} instruction {self.instruction!r} in computation {self.computation!r}"
            if self.source_location:
                where += f" (at {self.source_location})"
            message = f"{where}: {message}"
        super().__init__(message)
