"""Waiting for a small all-reduce by polling it, for as long as its calls usually take.

Why: on this kind of host (a virtual machine whose idle virtual CPUs halt), a gloo all-reduce
of 64 KB to 1 MB between two processes took either about half a millisecond or 3-4 ms, the
second in 20-60% of the calls from one minute to the next, whoever made them (torch.distributed's
own all_reduce as much as ours; benchmarks/collectives_gloo.md, session 13). A raw TCP round trip
of the same bytes between the same two processes never did: the stall comes with gloo's hand-overs
between its threads (its loop thread receives, a condition variable wakes the waiter), each a
wake-up of a thread whose CPU may have gone idle. A waiter that polls the call keeps its CPU
busy, and yields it to any thread that wants it (`os.sched_yield`), so gloo's own threads run at
once when their data arrives: in the all-reduce benchmark, whose two processes meet in lock step,
fewer 1 MB calls stalled and the median call was faster than a blocking one (under moderate load
at 4 MB too), for 1.0-1.4x gloo's CPU time per call (benchmarks/collectives_gloo.md, session 13).

Polling pays only while the call ends soon: each bucket call or pair exchange
(GlooCommunicator.reduce's _BucketCall, _PairCall) keeps how long its calls usually take
(`typical`, polled or not), and polls a call for up to twice that, at least `POLL_S` and at most
the window (`POLL_MAX_S`): a 4 MB call polled
only for its first 1.5 ms then blocked through the rest, and its stalls with it. A score says how
often its calls ended within their poll; below `HIT_MIN` (a host so busy that calls take longer,
a slow network between hosts, values that take longer than the window to cross) its waits block
from the first moment, as gloo's do, until its calls end within the window again. Nor does a
waiter poll while runnable tasks wait for a CPU more than `PRESSURE_MAX` of the time (the
kernel's CPU pressure, emulator.host.cpu_pressure): there a poller would hold a CPU others
want, where a sleeper woken by gloo costs nobody anything.
`NEURON_CUSTOMCALL_COLLECTIVE_POLL_US` sets the window; **the default is 0: never poll.** Why off:
in a data-parallel training step (benchmarks/pjrt_data_parallel.py, 2 processes) the ranks reach
their all-reduces at different times, so a waiter polls through its peer's remaining work: the
step's wall time was the same with and without polling (19.2-23.6 ms against 19.9-20.5) and its
CPU time 10-45% higher (28.8-39.9 ms a step, all ranks, against 26.2-28.7). Polling pays where
the processes meet in lock step, as in the all-reduce benchmark (benchmarks/collectives_gloo.md,
session 13): `NEURON_CUSTOMCALL_COLLECTIVE_POLL_US=6000` there.
"""
from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from typing import Any

from emulator import host

log = logging.getLogger(__name__)

#: The shortest poll: three times a 1 MB all-reduce's usual time on localhost.
POLL_S = 1.5e-3
#: A window that covers a 4 MB all-reduce on localhost (2.3-3 ms when it does not stall): what the
#: benchmark sets (polling is off by default: see above).
POLL_MAX_S = 6e-3
#: A call is polled for up to this many times its reduction's typical duration (within the above).
POLL_FACTOR = 2.0
ENV = "NEURON_CUSTOMCALL_COLLECTIVE_POLL_US"
#: Waiters poll only while some task waited for a CPU at most this share of the last second: the
#: two-process benchmark on 2 CPUs makes 30% itself (each process's main thread and gloo's
#: threads), a machine with other work 66-87% at load 5 (benchmarks/collectives_gloo.md).
PRESSURE_MAX = 0.5
#: A call's waits poll while its score (how often its calls ended within the window) is at least this.
HIT_MIN = 0.5
#: The weight of the latest call in the score: from 1, three calls in a row past the window stop
#: the polling; from 0, three within it start it again.
HIT_WEIGHT = 0.25


def window_from_env() -> float:
    """The polling window in seconds from NEURON_CUSTOMCALL_COLLECTIVE_POLL_US (default 0: no
    polling; a value that is not a number of microseconds from 0 to 100000 is logged and
    ignored)."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return 0.0
    try:
        us = float(raw)
    except ValueError:
        us = -1.0
    if not 0 <= us <= 100_000:
        log.warning("%s=%r is not a number of microseconds from 0 to 100000; not polling", ENV, raw)
        return 0.0
    return us * 1e-6


class PolledWait:
    """The polling of one kind of call (one bucket call or pair exchange): how long its calls take, its score,
    and the poll itself."""

    __slots__ = ("window", "typical", "score", "polled", "ended")

    def __init__(self, window: float) -> None:
        self.window = window
        self.typical = POLL_S / POLL_FACTOR  # the calls' typical duration (a moving average)
        self.score = 1.0
        self.polled = 0  # calls whose wait polled (diagnostics)
        self.ended = 0  # of them, ended within their poll

    def limit(self) -> float:
        """How long the next call is polled: twice its reduction's typical duration, at least
        POLL_S, at most the window."""
        return min(self.window, max(POLL_S, POLL_FACTOR * self.typical))

    def poll(self, works: Sequence[Any], posted: float) -> None:
        """Poll `works` (gloo Work objects, posted at perf_counter() `posted`) until they complete
        or the poll's limit, if this call's score says it pays. The caller then waits as before:
        at once, for works that completed (a failed one raises there)."""
        if self.window <= 0 or self.score < HIT_MIN or (host.cpu_pressure() or 0.0) > PRESSURE_MAX:
            return
        self.polled += 1
        end = posted + self.limit()
        clock, yield_cpu = time.perf_counter, os.sched_yield
        for work in works:
            while not work.is_completed():
                if clock() >= end:
                    return
                yield_cpu()
        self.ended += 1

    def learn(self, posted: float, ended: float) -> None:
        """Count a call that ended at `ended` (posted at `posted`): its duration, and whether it
        ended within the window (a call that took longer can not have been polled to its end).
        Nothing to learn with polling off (a window of 0, the default)."""
        if self.window <= 0:
            return
        took = ended - posted
        hit = 1.0 if took <= self.window else 0.0
        self.score += HIT_WEIGHT * (hit - self.score)
        self.typical += HIT_WEIGHT * (min(took, self.window) - self.typical)
