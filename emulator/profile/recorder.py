"""Records a profiled execution: one event per executed instruction and engine, scheduled on
per-engine timelines.

The schedule is dependency-aware and simple: an instruction starts on an engine when its
operands are ready and that engine is free; engines run in parallel. Sub-computations (loop
bodies, branches) see their parameters ready when the calling instruction's operands are.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from emulator.cost.engines import NONE, Cost


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

    def schedule(self, name: str, op: str, cost: Cost, ready: float, shapes: str) -> float:
        """Records the instruction's events; returns when its result is ready."""
        if not cost:
            self.events.append(Event(name, op, NONE, ready, 0.0, shapes))
            return ready
        done = ready
        for engine, cycles in cost.items():
            start = max(ready, self.engine_free.get(engine, 0.0))
            self.engine_free[engine] = start + cycles
            self.events.append(Event(name, op, engine, start, cycles, shapes))
            done = max(done, start + cycles)
        return done
