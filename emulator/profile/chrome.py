"""Chrome trace event format: one track (tid) per engine of the estimated device timeline in
process 1 (an NKI kernel's instructions nested inside its event on each engine), and the
emulator's host wall time per instruction in process 2. Complete events
(`ph: "X"`) with `ts`/`dur` in microseconds; metadata events name processes and threads."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emulator.cost.engines import ENGINES, NONE

if TYPE_CHECKING:
    from emulator.profile.profile import Profile

DEVICE_PID = 1
HOST_PID = 2
HOST_TID = 1


def _meta(pid: int, tid: int | None, kind: str, name: str) -> dict[str, Any]:
    event: dict[str, Any] = {"ph": "M", "pid": pid, "name": kind, "args": {"name": name}}
    if tid is not None:
        event["tid"] = tid
    return event


def chrome_trace(profile: "Profile") -> dict[str, Any]:
    """The trace as a JSON-ready dict: {"traceEvents": [...], "displayTimeUnit": "ns", ...}."""
    us = 1e6 / profile.clock_hz
    tids = {engine: k + 1 for k, engine in enumerate(ENGINES)}
    events: list[dict[str, Any]] = [_meta(DEVICE_PID, None, "process_name", "NeuronCore-v2 (estimated)"),
                                    _meta(HOST_PID, None, "process_name", "emulator host (wall time)"),
                                    _meta(HOST_PID, HOST_TID, "thread_name", "instructions")]
    for engine, tid in tids.items():
        events.append(_meta(DEVICE_PID, tid, "thread_name", engine))
        events.append({"ph": "M", "pid": DEVICE_PID, "tid": tid, "name": "thread_sort_index",
                       "args": {"sort_index": tid}})
    for ev in profile.events:
        if ev.engine == NONE:
            continue
        tid = tids.setdefault(ev.engine, len(tids) + 1)
        args = {"op": ev.op, "shapes": ev.shapes, "cycles": ev.cycles} if ev.detail is None else {
            "op": ev.op, "cycles": ev.cycles, **ev.detail}
        if ev.source:
            args["source"] = ev.source
        events.append({"ph": "X", "pid": DEVICE_PID, "tid": tid, "name": ev.name,
                       "cat": ev.engine if ev.detail is None else f"{ev.engine} (kernel instruction)",
                       "ts": ev.start * us, "dur": ev.cycles * us, "args": args})
    for h in profile.host:
        events.append({"ph": "X", "pid": HOST_PID, "tid": HOST_TID, "name": h.name, "cat": "host",
                       "ts": h.start * 1e6, "dur": h.seconds * 1e6,
                       "args": {"op": h.op, "depth": h.depth, **({"source": h.source} if h.source else {})}})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"clock_hz": profile.clock_hz, "total_cycles": profile.total_cycles,
                          "estimated_seconds": profile.total_seconds}}
