"""Compile flags: part of the artifact's identity (recorded in its manifest, and in cache keys)."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class CompileFlags:
    """Options of one compilation.

    verify: check operand and result shapes of every instruction before lowering (cheap; off only
        to compile a module known to be valid a little faster).
    instruction_names: keep each HLO instruction's name in the program, so runtime errors and
        `inspect` can point at it (costs a few bytes per instruction).
    """

    verify: bool = True
    instruction_names: bool = True

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
