"""Waiting for a small all-reduce by polling it, for as long as its calls usually take.

Why: on this kind of host (a virtual machine whose idle virtual CPUs halt), a gloo all-reduce
of 64 KB to 1 MB between two processes took either about half a millisecond or 3-4 ms, the
second in 20-60% of the calls from one minute to the next, whoever made them (torch.distributed's
own all_reduce as much as ours; benchmarks/collectives_gloo.md, session 13). A raw TCP round trip
of the same bytes between the same two processes never did: the stall comes with gloo's hand-overs
between its threads (its loop thread receives, a condition variable wakes the waiter), each a
wake-up of a thread whose CPU may have gone idle. A waiter that polls the call keeps its CPU
busy, and yields it to any thread that wants it (`os.sched_yield`), so gloo's own threads run at
once when their data arrives: measured in the same rounds, the stalled share fell and a 4 MB
all-reduce took 0.7-0.85x the time of a blocking one, with the same CPU time per call.

Polling pays only while the call ends soon: each bucket call (GlooCommunicator.reduce's
_BucketCall) keeps a score of how often its calls ended within `POLL_S` of being posted, polled
or not. Below `HIT_MIN` (a host so busy that calls take longer, a slow network between hosts)
its waits block from the first moment, as gloo's do, until its calls end within the window again.
`NEURON_CUSTOMCALL_COLLECTIVE_POLL_US` sets the window (0: never poll).
"""
from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from typing import Any

log = logging.getLogger(__name__)

#: The longest a waiter polls a call before it blocks: three times a 1 MB all-reduce's usual
#: time on localhost, and the first steps of a 4 MB one (1.5 ms gave 4 MB the best times of the
#: windows tried, 0.8, 1.5 and 3 ms; benchmarks/collectives_gloo.md, session 13).
POLL_S = 1.5e-3
ENV = "NEURON_CUSTOMCALL_COLLECTIVE_POLL_US"
#: A call's waits poll while its score (how often its calls ended within the window) is at least this.
HIT_MIN = 0.5
#: The weight of the latest call in the score: from 1, three calls in a row past the window stop
#: the polling; from 0, three within it start it again.
HIT_WEIGHT = 0.25


def window_from_env() -> float:
    """The polling window in seconds from NEURON_CUSTOMCALL_COLLECTIVE_POLL_US (default POLL_S;
    a value that is not a number of microseconds from 0 to 100000 is logged and ignored)."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return POLL_S
    try:
        us = float(raw)
    except ValueError:
        us = -1.0
    if not 0 <= us <= 100_000:
        log.warning("%s=%r is not a number of microseconds from 0 to 100000; polling for %g us", ENV, raw,
                    POLL_S * 1e6)
        return POLL_S
    return us * 1e-6


class PolledWait:
    """The polling of one kind of call (one bucket call): its score, and the poll itself."""

    __slots__ = ("window", "score", "polled", "ended")

    def __init__(self, window: float) -> None:
        self.window = window
        self.score = 1.0
        self.polled = 0  # calls whose wait polled (diagnostics)
        self.ended = 0  # of them, ended within the window

    def poll(self, works: Sequence[Any], posted: float) -> None:
        """Poll `works` (gloo Work objects, posted at perf_counter() `posted`) until they complete
        or the window ends, if this call's score says it pays. The caller then waits as before:
        at once, for works that completed (a failed one raises there)."""
        if self.window <= 0 or self.score < HIT_MIN:
            return
        self.polled += 1
        end = posted + self.window
        clock, yield_cpu = time.perf_counter, os.sched_yield
        for work in works:
            while not work.is_completed():
                if clock() >= end:
                    return
                yield_cpu()
        self.ended += 1

    def learn(self, posted: float, ended: float) -> None:
        """Count a call that ended at `ended` (posted at `posted`): whether it ended within the window."""
        hit = 1.0 if ended - posted <= self.window else 0.0
        self.score += HIT_WEIGHT * (hit - self.score)
