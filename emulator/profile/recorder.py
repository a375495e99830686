"""Records a profiled execution: one event per executed instruction and engine, scheduled on
per-engine timelines.

The schedule is dependency-aware and simple: an instruction starts on an engine when its
operands are ready and that engine is free; engines run in parallel. Sub-computations (loop
bodies, branches) see their parameters ready when the calling instruction's operands are.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from emulator.cost.engines import NONE, Cost

#: The most per-instruction events one kernel execution adds per engine.
MAX_DETAILS = 512


@dataclass(frozen=True)
class Event:
    """One instruction's work on one engine: estimated cycles from `start` on that engine's
    timeline. `engine` is "none" for instructions that cost nothing on the device."""

    name: str
    op: str
    engine: str
    start: float
    cycles: float
    shapes: str = ""
    #: An instruction inside a kernel, laid out within its kernel's event on the same engine
    #: (the kernel's own event already counts its cycles: totals skip details).
    detail: dict | None = None
    #: "file:line" of the user's code the HLO instruction came from ("" when not recorded).
    source: str = ""

    @property
    def end(self) -> float:
        return self.start + self.cycles


@dataclass(frozen=True)
class HostSpan:
    """The emulator's own wall time of one instruction (inclusive of sub-computations)."""

    name: str
    op: str
    start: float  # seconds since the run began
    seconds: float
    depth: int = 0  # 0: an instruction of the entry computation; 1: of a body it calls; ...
    source: str = ""  # "file:line" of the user's code the instruction came from


@dataclass
class Recorder:
    """Engine timelines and the events of one run."""

    events: list[Event] = field(default_factory=list)
    host: list[HostSpan] = field(default_factory=list)
    engine_free: dict[str, float] = field(default_factory=dict)
    #: When the operands of the instruction now calling a sub-computation were ready.
    call_ready: float = 0.0
    origin: float = 0.0  # perf_counter() at the start of the run
    depth: int = 0  # nesting of the computation running now

    def reset(self, origin: float) -> None:
        """Empties the timelines for a new run starting at perf_counter() `origin`."""
        self.events, self.host, self.engine_free = [], [], {}
        self.call_ready, self.origin, self.depth = 0.0, origin, 0

    def schedule(self, name: str, op: str, cost: Cost, ready: float, shapes: str,
                 source: str = "") -> float:
        """Records the instruction's events; returns when its result is ready."""
        if not cost:
            self.events.append(Event(name, op, NONE, ready, 0.0, shapes, source=source))
            return ready
        done = ready
        parts = getattr(cost, "parts", None)
        for engine, cycles in cost.items():
            start = max(ready, self.engine_free.get(engine, 0.0))
            self.engine_free[engine] = start + cycles
            self.events.append(Event(name, op, engine, start, cycles, shapes, source=source))
            done = max(done, start + cycles)
            if parts:
                self._details(name, engine, start, start + cycles, parts.get(engine, ()))
        return done

    def _details(self, kernel: str, engine: str, start: float, end: float, parts: tuple) -> None:
        """A kernel's instructions on `engine`, one after another from `start` (their cycles add
        up to the kernel's on that engine); beyond MAX_DETAILS the rest is one event."""
        if len(parts) > MAX_DETAILS:
            rest = parts[MAX_DETAILS - 1:]
            parts = parts[:MAX_DETAILS - 1]
        else:
            rest = []
        at = start
        for p in parts:
            label = f"{p.op} ({p.line})" if p.line else p.op
            self.events.append(Event(label, p.op, engine, at, p.cycles, "", detail={
                "kernel": kernel, "line": p.line, "executions": p.executions, "bytes": p.bytes}))
            at += p.cycles
        if rest:
            self.events.append(Event(f"{len(rest)} more instructions", "", engine, at, max(end - at, 0.0), "",
                                     detail={"kernel": kernel, "instructions": len(rest)}))
