"""Framework-neutral, JSON-serialisable descriptions of a GpSimd custom-op library and its ops.

They carry everything a runner needs besides the library bytes (op index, compute symbol,
argument kinds, multicore switch, stack size), so later stages can embed a library in an artifact
and run it from there; nothing here is pickled.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from emulator.gpsimd.errors import unknown_name

ARG_KINDS = ("tensor", "scalar", "double", "int64")


@dataclass(frozen=True)
class OpDescriptor:
    """One registered op: `name` as called, `compute` as registered, `symbol` as found."""

    library: str
    name: str
    index: int
    compute: str
    symbol: str
    args: tuple[str, ...]
    multicore: bool = False
    stack_size: int = 0

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "OpDescriptor":
        data = json.loads(text)
        data["args"] = tuple(data["args"])
        return cls(**data)


@dataclass(frozen=True)
class LibraryDescriptor:
    """A built library: its NEURON_LIBRARY name, build switches, content hash and ops."""

    library: str
    sha256: str
    multicore: bool
    stack_size: int
    ops: tuple[OpDescriptor, ...] = field(default_factory=tuple)

    def op(self, name: str) -> OpDescriptor:
        for op in self.ops:
            if op.name == name:
                return op
        raise unknown_name("op", name, [op.name for op in self.ops], f" in library '{self.library}'")

    def to_json(self) -> str:
        data = asdict(self)
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "LibraryDescriptor":
        data = json.loads(text)
        ops = tuple(
            OpDescriptor(**{**op, "args": tuple(op["args"])}) for op in data.pop("ops")
        )
        return cls(**data, ops=ops)
