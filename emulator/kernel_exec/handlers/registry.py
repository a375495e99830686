"""How an engine's handler module registers its instructions (a decorator beside each handler).

Each engine module creates one ``EngineHandlers`` for its engine; registering an instruction the
spec gives to another engine fails at import, so an instruction can only live in its engine's
module (emulator/kernel_ir/instructions.py is the one place that says which that is).
"""

from __future__ import annotations

from typing import Callable

from emulator.kernel_ir.instructions import spec

Handler = Callable[..., None]


class EngineHandlers:
    """The handlers of one engine's instructions, by op name."""

    def __init__(self, engine: str):
        self.engine = engine
        self.table: dict[str, Handler] = {}

    def register(self, op: str) -> Callable[[Handler], Handler]:
        s = spec(op)
        if s.engine != self.engine:
            raise ValueError(f"instruction {op!r} runs on {s.engine}, so its handler belongs in "
                             f"handlers/{s.engine}.py, not with the {self.engine} engine")
        if op in self.table:
            raise ValueError(f"instruction {op!r} has two handlers")

        def add(fn: Handler) -> Handler:
            self.table[op] = fn
            return fn
        return add
