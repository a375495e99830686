"""A profile of one execution: per-engine totals, the makespan, top instructions, a summary."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from emulator.cost.constants import CLOCK_HZ
from emulator.cost.engines import ENGINES, NONE
from emulator.profile.recorder import Event, HostSpan


@dataclass(frozen=True)
class InstructionTotal:
    """An instruction's estimated cycles summed over its executions (loops) and engines."""

    name: str
    op: str
    engines: tuple[str, ...]
    cycles: float
    count: int
    host_seconds: float
    #: "file:line" of the user's code the instruction came from ("" when not recorded).
    source: str = ""


class Profile:
    """Events of one profiled run and what they add up to (times at `clock_hz`)."""

    def __init__(self, events: list[Event], host: list[HostSpan], clock_hz: float = CLOCK_HZ) -> None:
        self.events = events
        self.host = host
        self.clock_hz = clock_hz

    @property
    def total_cycles(self) -> float:
        """The makespan: when the last engine finishes."""
        return max((e.end for e in self.events), default=0.0)

    @property
    def total_seconds(self) -> float:
        """Estimated device time of the execution."""
        return self.total_cycles / self.clock_hz

    @property
    def host_seconds(self) -> float:
        """The emulator's wall time, summed over top-level instructions."""
        return sum(h.seconds for h in self.host if h.depth == 0)

    def busy_cycles(self) -> dict[str, float]:
        """Cycles each engine works (all engines listed, idle ones with 0)."""
        busy = {e: 0.0 for e in ENGINES}
        for ev in self.events:
            if ev.engine != NONE and ev.detail is None:
                busy[ev.engine] = busy.get(ev.engine, 0.0) + ev.cycles
        return busy

    def top(self, n: int = 10) -> list[InstructionTotal]:
        """The `n` instructions with the most estimated cycles (summed over executions)."""
        cycles: dict[tuple[str, str], float] = defaultdict(float)
        engines: dict[tuple[str, str], set[str]] = defaultdict(set)
        sources: dict[tuple[str, str], str] = {}
        for ev in self.events:
            if ev.engine != NONE and ev.detail is None:
                cycles[(ev.name, ev.op)] += ev.cycles
                engines[(ev.name, ev.op)].add(ev.engine)
                if ev.source:
                    sources.setdefault((ev.name, ev.op), ev.source)
        count: dict[tuple[str, str], int] = defaultdict(int)
        wall: dict[tuple[str, str], float] = defaultdict(float)
        for h in self.host:
            count[(h.name, h.op)] += 1
            wall[(h.name, h.op)] += h.seconds
        ranked = sorted(cycles, key=lambda k: -cycles[k])[:n]
        return [InstructionTotal(k[0], k[1], tuple(sorted(engines[k])), cycles[k], count[k], wall[k],
                                 sources.get(k, ""))
                for k in ranked]

    def summary(self, top: int = 10) -> str:
        """A text table: time per engine, the estimated total, the top instructions."""
        total = self.total_cycles or 1.0
        lines = [f"estimated time of one execution on a trn1 NeuronCore-v2 at {self.clock_hz / 1e9:.2f} GHz: "
                 f"{self.total_seconds * 1e6:.3f} us ({self.total_cycles:,.0f} cycles); "
                 f"emulator wall time {self.host_seconds * 1e3:.3f} ms",
                 "", f"{'engine':<8} {'busy cycles':>14} {'est. time (us)':>15} {'busy %':>7}"]
        for engine, cycles in self.busy_cycles().items():
            lines.append(f"{engine:<8} {cycles:>14,.0f} {cycles / self.clock_hz * 1e6:>15.3f} "
                         f"{100 * cycles / total:>6.1f}%")
        ranked = self.top(top)
        # kernels are named "my_ops::relu_forward (custom-call.17)": wide enough for those, bounded
        w = min(max([32, *(len(t.name) for t in ranked)]), 64)
        lines += ["", f"top {top} instructions by estimated cycles:",
                  f"{'instruction':<{w}} {'op':<14} {'engine':<14} {'runs':>5} {'cycles':>12} {'us':>9} "
                  f"{'host ms':>8}  source"]
        for t in ranked:
            lines.append(f"{t.name[:w]:<{w}} {t.op[:14]:<14} {','.join(t.engines)[:14]:<14} {t.count:>5} "
                         f"{t.cycles:>12,.0f} {t.cycles / self.clock_hz * 1e6:>9.3f} {t.host_seconds * 1e3:>8.3f}"
                         f"  {_short(t.source)}".rstrip())
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """Per-engine totals and the makespan, as plain data."""
        return {"clock_hz": self.clock_hz, "total_cycles": self.total_cycles, "total_seconds": self.total_seconds,
                "busy_cycles": self.busy_cycles(), "host_seconds": self.host_seconds}

    def to_chrome_trace(self) -> dict[str, Any]:
        """Chrome trace event JSON (Perfetto, chrome://tracing); see emulator.profile.chrome."""
        from emulator.profile.chrome import chrome_trace

        return chrome_trace(self)


def _short(source: str) -> str:
    """``file:line`` with the file's directory left out (the table is read beside the code)."""
    return source.rsplit("/", 1)[-1]
