"""Prepared calls' signalling: a shared control page between the host and its GpSimd worker.

Why: a compiled graph calls the same few ops over and over. Sending each call as a JSON request
over a pipe, and waking a sleeping process at each end, cost about 80 us a call where the kernel
itself takes 10. So an op's call is prepared once (its JSON, with its tensors at fixed places in
a shared file, is sent over the pipe and checked by the worker), and every later call is a call
number and a sequence number written into this page. While the machine has a CPU for each
side (`may_poll`), each side polls the page for a bounded time after its own step (the worker
after each reply, the host after each request), so that calls that follow each other closely
wake nobody; without, or past the poll, each side sleeps on its pipe as
before, and the other side writes an empty frame (a wake token) into that pipe when it sees the
sleeper's flag. The pipes and their time limits stay the one authority on crashes and hangs.

Layout (native 64-bit words, x86-64): words 0-7 are written by the host only, words 8-15 by the
worker only (separate cache lines), then the runtime's output buffers, which the worker hands to
``ncc_gpsimd_run`` directly, so a reply copies nothing:

=========  ===========================================================================
word 0     request sequence number (the host writes it last, after word 1)
word 1     prepared call id
word 2     1 while the host sleeps on the reply pipe
word 3     the longest the worker may poll for the next call after a reply, in nanoseconds
           (`worker_spin`: the host's choice from its load); 0: it sleeps at once
word 4     when the host wrote the request (CLOCK_MONOTONIC nanoseconds, before word 0): the
           worker sizes its next poll by the host's own gap (`request_gap`), not by when it saw
           the request, which includes its own wake-up when it slept
word 5     the host's CPU when it wrote the request (sched_getcpu; -1: unknown): the worker does
           not poll on the CPU the host needs (`shares_cpu`)
word 6     the longest gap between calls the worker may sleep through and then poll for the
           next call, in nanoseconds (`wake_ahead`: 0 under load, as word 3)
word 7     1 when the host expects another call soon after this one (`MORE`: a graph's run has
           more GpSimd calls to make, counted from its previous run): the worker then polls for
           it after its reply whatever its plan's score (`hinted_plan`, at least word 3); 0: no hint
word 8     reply sequence number (the worker writes it last, after word 9)
word 9     ncc_gpsimd_run's return code (0, 1 + error kind, 100), or a protocol refusal
word 10    1 while the worker sleeps on the request pipe
word 11    printf text length (size_t, written by the runtime)
word 12    the sequence number of the call the worker has taken and is running
words 13-15  the worker's counts since it started: calls it slept on the request pipe for, calls its poll
           found, polls it stopped as preempted (diagnostics: benchmarks/gpsimd_call.py)
words 16+  struct ncc_counters (8 x uint64, written by the runtime)
word 24    how long the worker polls for the next call after its latest reply, in nanoseconds
           (0: it sleeps at once; diagnostics, written before it sleeps)
word 25    the worker's count of stalls polled through (`Spinner`; diagnostics)
word 26    the worker's CPU when it took the latest call or began its latest poll (-1: unknown):
           the host does not poll on the worker's CPU (`shares_cpu`)
words 27-28  the worker's counts since it started: sleeps timed to end just before the expected
           next call (`wait_plan`), polls it began on the host's CPU and moved off it for (`host.leave_cpu`; diagnostics)
word 29    the worker's estimate of how late its timed sleeps end, in nanoseconds (diagnostics)
word 30    the worker's count of calls after which it slept on its pipe because the plan for the
           gap after them had been missing (`next_score`; diagnostics)
word 31    the worker's count of calls found by polling after a prime (diagnostics)
word 32    a prime (written by the host only): the sequence number of the call that a graph's run,
           just started, is about to make (`PRIME`); the host writes it and then a wake token to a
           sleeping worker, which polls for that call for up to word 33 nanoseconds
word 33    how long the worker may poll after a prime, in nanoseconds (`prime_window`)
byte 4096  error message buffer (abi.ERROR_CAPACITY bytes, NUL-terminated)
byte 8192  core 0's printf text (abi.TEXT_CAPACITY bytes)
=========  ===========================================================================

The page is writable by the worker, where user code runs: the host checks every word it reads
(the sequence number must be its own, the text length within the buffer, the code a known one)
and the worker checks the call id against the calls it prepared.

A graph's runs: the host knows what the worker can only guess. A compiled graph makes the same
GpSimd calls in the same order at every run, and the executor tells the host when a run begins
(`WorkerProcess.prime`, a run-start hook of the program). Two things follow (`GraphRuns`):

* The run's first call comes after the host's own work between two runs (the framework's step:
  about 1 ms in the main job, varying by 40%), too long to poll through and too irregular for a
  timed sleep, so it found the worker asleep and paid its wake-up (63-82 us against 24-28 for
  the calls inside the graph). So at the start of a run the host wakes a sleeping worker with a
  prime (words 32-33 and a wake token) and the worker polls for that call while the host runs
  the graph up to it: twice the lead the graph's previous run had (`prime_window`).
* With each call the host says whether its run has more calls to come (word 7, from the count
  of the graph's previous run). The worker then polls up to the cap after its reply whatever its
  plan's score says: inside a graph the gaps it measures include the host's own wake-ups when
  the host slept for a reply, which pushed the scores of the graph's short gaps below `HIT_MIN`
  (57% of a graph's calls followed no plan in the benchmark's quiet run).

Lost wake-ups: a sleeper sets its flag and then reads the other side's sequence word again;
without a memory fence (the Python host has none) the two can cross (each side reading the other's
old word). So the host's first sleep for a reply is a short slice (`FIRST_SLICE`), after which it
looks again, by which time every store has long reached memory: the reply it missed, or a worker
asleep that has not taken the call, which it wakes again. The worker sleeps on its pipe without
a slice of its own: a slice there ended once in every gap longer than it (the main job's step's
own work between graphs: one wake-up a step for nothing). A wake token that turns out to be
spurious costs one empty read.
"""

from __future__ import annotations

import mmap
import os
import resource
import struct
import time

from emulator import host
from emulator.gpsimd import abi, protocol

REQUEST, CALL, HOST_WAITING, POLL, REQUEST_AT, HOST_CPU, WAKE_AHEAD, MORE = 0, 1, 2, 3, 4, 5, 6, 7
REPLY, CODE, WORKER_WAITING, TEXT_LEN, TAKEN = 8, 9, 10, 11, 12
WORKER_SLEPT, WORKER_POLLED, WORKER_PREEMPTED = 13, 14, 15
NEXT_POLL, WORKER_STALLS, WORKER_CPU, WORKER_TIMED, WORKER_SHARED, WORKER_LATE = 24, 25, 26, 27, 28, 29
WORKER_UNPLANNED, WORKER_PRIMED = 30, 31
#: Host-written words on a cache line of their own (the worker reads them only when woken).
PRIME, PRIME_POLL = 32, 33
COUNTERS_OFFSET = 16 * 8
ERROR_OFFSET = 4096
TEXT_OFFSET = 8192
SIZE = TEXT_OFFSET + abi.TEXT_CAPACITY
#: A protocol refusal in the code word (not one of ncc_gpsimd_run's codes): the worker did not
#: recognise the call id; the error buffer says why.
REFUSED = 1000

#: How long the host polls for a reply before it sleeps (a 32x120 ReLU's reply comes in about
#: 12 us; a long kernel costs at most this much spinning per call).
HOST_SPIN = 300e-6
#: How long the host polls for the worker to take a call before it sleeps: a polling worker
#: takes it within a microsecond, a sleeping one must be woken, and one that waits for a CPU on
#: a busy machine takes longer than it is worth polling for.
TAKE_SPIN = 30e-6
#: The longest the worker polls for the next call after a reply before it sleeps (how long it
#: does: wait_plan). The main job's step has gaps of 40, 174 and 38 us between its four
#: calls at best: polling through the 174 us gap cost more worker CPU than the wake-up it saves
#: (a wake-up is a few microseconds of each side's CPU), so only gaps up to 50 us are polled.
WORKER_SPIN = 50e-6
#: The same with a CPU free beyond the host's and the worker's (free_cpus() > POLL_CPUS): the
#: worker's poll then takes a CPU nobody else wants, and polling through the main job's 174 us
#: gap saves each side a sleep and a wake-up (the host's CPU per call: 17 us when it sleeps,
#: 13 when both poll, at load 6-9 with the worker's C loop).
WORKER_SPIN_SPARE = 200e-6
#: The worker's poll never exceeds this, whatever word 3 says (the page is writable by kernels).
WORKER_SPIN_MAX = 1e-3
#: wait_plan's margin: the worker polls up to twice the last gap plus this.
SPIN_MARGIN = 20e-6
#: A gap between two looks at the clock that means the poller lost its CPU, and how long it
#: then sleeps without polling (Spinner).
PREEMPTED = protocol.PREEMPTED
BACKOFF = 0.1
#: The first back-off after a poll that was not preempted (`Spinner`): each preempted poll
#: doubles the next back-off up to `BACKOFF`, each poll that was not halves it down to this.
#: On the idle machine a poll is preempted about once every 50-100 ms anyway (a kernel thread,
#: a daemon waking up), which with a fixed 100 ms back-off switched polling off for most of the
#: time (session 10: 91% of the calls slept on both sides at 0% load); under real contention
#: nearly every poll is preempted and the back-off reaches 100 ms within seven polls.
BACKOFF_FIRST = 1e-3
#: The first sleep of either side, after which it reads the other side's word again (see above).
FIRST_SLICE = 1e-3
#: Gaps between calls longer than the poll cap (the main job's 174 us between its second and
#: third call, and the step's own gap before the next step's first call): up to this long, the
#: worker sleeps until just before the call it expects and then polls for it (`wait_plan`), so
#: that the call finds it awake without its having polled through the gap. Longer gaps (the
#: host's work between graphs) are slept through on the pipe. The host sets it in word 6 while
#: the worker may poll at all (`wake_ahead`); the worker never uses more than
#: `SLEEP_THROUGH_MAX` whatever that word says (the page is writable by kernels).
SLEEP_THROUGH = 5e-3
SLEEP_THROUGH_MAX = 20e-3
#: How early before the expected call a timed sleep ends: the worker's estimate of how late its
#: timed sleeps end (a timer's wake-up from an idle virtual CPU takes tens of microseconds),
#: plus this margin, at most `LEAD_MAX` (which also bounds the poll before the expected time).
WAKE_MARGIN = 10e-6
LEAD_MAX = 150e-6
#: The estimate's start, before the worker has timed a sleep of its own.
LATE_FIRST = 30e-6
#: A timed sleep's poll goes on past the expected time for `SPIN_MARGIN` plus this share of the
#: gap (the host's own work between calls varies by some percent), at most `WORKER_SPIN_SPARE`.
WAKE_WINDOW_SHARE = 0.25
#: A call's plan (`wait_plan`) is followed while the plan made from its last gap found the next
#: call at least this share of the time (`next_score`); below, the worker sleeps on its pipe
#: after that call and the host wakes it. Why: a gap that does not repeat (the host's own work
#: between two graphs, with its allocations, collections and other threads) makes the plan
#: miss late: the worker then polls its whole lead and window (up to 350 us) in vain and the
#: host wakes it anyway. A gap that repeats (a graph's calls) keeps its score near 1.
HIT_MIN = 0.5
#: The weight of the latest outcome in a call's score: three late misses in a row from a score
#: of 1 stop the plan, three plans that would have found the call start it again.
HIT_WEIGHT = 0.25

#: A prime's poll before the graph's lead to its first call is known.
PRIME_FIRST = 200e-6

WAKE_TOKEN = b"\0\0\0\0"  # an empty frame: "look at the page"
#: The CPUs that must be free of other processes' work for polling to pay: one for the host,
#: one for the worker.
POLL_CPUS = 2
_COUNTERS = struct.Struct(f"={len(abi.COUNTER_FIELDS)}Q")
assert COUNTERS_OFFSET + _COUNTERS.size <= NEXT_POLL * 8, "the counters run into word NEXT_POLL"


class ControlPage:
    """The page mapped from an open file descriptor of `SIZE` bytes (a memfd the host made)."""

    def __init__(self, fd: int) -> None:
        if os.fstat(fd).st_size != SIZE:
            raise ValueError(f"the control page must be {SIZE} bytes")
        self.map = mmap.mmap(fd, SIZE)
        self.words = memoryview(self.map).cast("q")

    def address(self, offset: int) -> int:
        """The address in this process of the page's byte `offset` (for ncc_gpsimd_run)."""
        import ctypes

        anchor = ctypes.c_char.from_buffer(self.map, offset)
        address = ctypes.addressof(anchor)
        del anchor
        return address

    def counters(self) -> tuple[int, ...]:
        return _COUNTERS.unpack_from(self.map, COUNTERS_OFFSET)

    def error(self) -> str:
        raw = self.map[ERROR_OFFSET:ERROR_OFFSET + abi.ERROR_CAPACITY]
        end = raw.find(b"\0")
        return raw[: end if end >= 0 else len(raw)].decode("utf-8", "replace")

    def set_error(self, message: str) -> None:
        data = message.encode()[: abi.ERROR_CAPACITY - 1] + b"\0"
        self.map[ERROR_OFFSET:ERROR_OFFSET + len(data)] = data

    def text(self) -> str | None:
        """Core 0's printf output of the latest run; None when the length word is out of range
        (the page was overwritten)."""
        n = self.words[TEXT_LEN]
        if not 0 <= n <= abi.TEXT_CAPACITY:
            return None
        return self.map[TEXT_OFFSET:TEXT_OFFSET + n].decode("utf-8", "replace") if n else ""

    def close(self) -> None:
        self.words.release()
        self.map.close()


def may_poll() -> bool:
    """Whether either side should poll at all: only while the machine has a CPU for the host and
    one for the worker that other processes are not using (emulator.host: the CPU time other
    processes used over the last second). Beside other processes' work a poller competes with
    them for a CPU, and a woken sleeper runs sooner than a preempted poller: at load 10-13 on 2
    CPUs, calls without any polling took 15-25% less CPU on both sides and 20-30% less wall
    time than with the worker's and the host's polls (benchmarks/gpsimd_call.md)."""
    return host.free_cpus() >= POLL_CPUS


def worker_spin() -> float:
    """How long the worker may poll for the next call after each reply (word 3), from the
    host's load (emulator.host.free_cpus): 0 without a free CPU for each side (as `may_poll`),
    `WORKER_SPIN` with exactly those two, `WORKER_SPIN_SPARE` with one more. The cap matters
    only for gaps between calls longer than 50 us: back to back, or with short host work
    between, the next call comes within a few microseconds and any cap polls for it."""
    free = host.free_cpus()
    if free < POLL_CPUS:
        return 0.0
    return WORKER_SPIN_SPARE if free > POLL_CPUS else WORKER_SPIN


def wake_ahead(spin: float) -> float:
    """Word 6 for a call whose worker may poll for `spin` seconds (`worker_spin`): `SLEEP_THROUGH`
    while it may poll at all, else 0 (under load neither side polls, and a timed wake-up would
    only take a CPU another process wants)."""
    return SLEEP_THROUGH if spin > 0 else 0.0


def wait_plan(gap: float | None, cap: float, ahead: float, late: float) -> tuple[float, float]:
    """How the worker waits for the next call after answering one that was followed, last time,
    after `gap` seconds (None: not known yet): (sleep, then poll), in seconds; past both it
    sleeps on its pipe. `cap` is the longest it may poll right away (word 3), `ahead` the
    longest gap it may sleep through and then poll (word 6), `late` its estimate of how late a
    timed sleep ends. Why: a graph's calls come in the same order at every run, so the gap
    after each call repeats. Up to the cap the worker polls (twice the gap plus a margin); a
    longer gap up to `ahead` it sleeps through and wakes `late` + `WAKE_MARGIN` before the
    expected call, polling from then until `SPIN_MARGIN` plus a quarter of the gap after it (a
    call that comes while it sleeps wakes it as before); longer gaps end a graph: it sleeps at
    once. The C loop (runtime/gpsimd_serve.h) computes the same."""
    if gap is None:
        return 0.0, cap
    if gap <= cap:
        return 0.0, min(cap, 2 * gap + SPIN_MARGIN)
    if gap > min(ahead, SLEEP_THROUGH_MAX):
        return 0.0, 0.0
    lead = min(max(late, 0.0) + WAKE_MARGIN, LEAD_MAX)
    window = min(SPIN_MARGIN + WAKE_WINDOW_SHARE * gap, WORKER_SPIN_SPARE)
    if gap <= lead:
        return 0.0, gap + window
    return gap - lead, lead + window


def hinted_plan(gap: float | None, cap: float) -> tuple[float, float]:
    """How the worker waits after a call whose host said more calls of its graph's run follow
    (word 7), the next having come `gap` seconds after it last time (None: not known yet): it
    polls at once, whatever the plan's score, for twice the gap plus `SPIN_MARGIN`, at least
    `cap` and at most `WORKER_SPIN_SPARE` (or `cap` when larger): the host has said a call comes,
    so a gap a little over the cap (the main job's 48 us between its second and third call
    against a 50 us cap) is polled through rather than slept through. The C loop computes the same."""
    poll = cap if gap is None else max(cap, 2 * gap + SPIN_MARGIN)
    return 0.0, min(poll, max(cap, WORKER_SPIN_SPARE))


def next_score(score: float, plan: tuple[float, float], gap: float) -> float:
    """A call's score (`HIT_MIN`) after the next call came `gap` seconds after it, where
    `plan` is the (sleep, poll) that `wait_plan` makes from the gap before (made whether the
    worker followed it or slept, so that a gap that repeats again is found out): a call within
    the plan's poll counts 1, one after it 0; one that came before the poll began (a sleeping
    worker is woken by the host as one asleep on its pipe would be) and a plan without a poll
    leave the score as it is. The C loop computes the same."""
    nap, poll = plan
    if poll <= 0 or gap < nap:
        return score
    return score + HIT_WEIGHT * ((1.0 if gap <= nap + poll else 0.0) - score)


def followed_plan(known: tuple[float, float] | None, cap: float, ahead: float, late: float) -> tuple[float, float]:
    """The (sleep, poll) the worker follows after a call whose learned (gap, score) is `known`
    (None: not learned yet): `wait_plan`'s, or neither while the score is below `HIT_MIN`."""
    if known is None:
        return wait_plan(None, cap, ahead, late)
    gap, score = known
    return wait_plan(gap, cap, ahead, late) if score >= HIT_MIN else (0.0, 0.0)


def learned(known: tuple[float, float] | None, gap: float, cap: float, ahead: float,
            late: float) -> tuple[float, float]:
    """A call's (gap, score) once the next call came `gap` seconds after it (`next_score`; a
    first gap starts at score 1)."""
    if known is None:
        return gap, 1.0
    return gap, next_score(known[1], wait_plan(known[0], cap, ahead, late), gap)


def next_late(late: float, observed: float) -> float:
    """The worker's estimate of how late its timed sleeps end, after one that ended `observed`
    seconds late: up at once to a later one, down by an eighth of the difference to an earlier
    one (a single slow wake-up makes the next few sleeps end a little earlier than needed,
    rather than many calls find the worker still asleep). The C loop computes the same."""
    observed = max(0.0, observed)
    return observed if observed > late else late + (observed - late) / 8


def request_gap(request_at_ns: int, replied_at: float, now: float) -> float:
    """How long after the worker's reply at `replied_at` the host sent the next call (word 4),
    for a worker that saw it at `now` (time.monotonic seconds, the same clock). Why not `now -
    replied_at`: a worker that slept sees the call only after its own wake-up, which on an idle
    virtual machine takes tens of microseconds; counting it made every later gap exceed the cap,
    so the worker never polled for that call again and every call paid two wake-ups (session 9's
    quiet run: 74 us a call, as slow as a bare pipe round trip). The word is writable by kernels:
    the result is kept within [0, now - replied_at] (it only sizes a poll the cap bounds).
    The C loop (runtime/gpsimd_serve.h) computes the same."""
    seen = max(0.0, now - replied_at)
    return min(seen, max(0.0, request_at_ns * 1e-9 - replied_at))


def prime_window(lead: float | None) -> float:
    """How long a primed worker may poll for a run's first call (word 33), when that call came
    `lead` seconds after the start of the graph's previous run (None: not known yet): twice the
    lead plus `SPIN_MARGIN`; 0 (no prime) when that exceeds `WORKER_SPIN_MAX`, since a call that
    far off costs more polling than the wake-up it saves."""
    if lead is None:
        return PRIME_FIRST
    window = 2 * lead + SPIN_MARGIN
    return window if window <= WORKER_SPIN_MAX else 0.0


class GraphRuns:
    """What the host knows of the graph runs whose calls one worker serves: per graph, how many
    calls its latest run made and how long after the run's start its first call came (the
    module docstring says why). Graphs and runs are numbers the executor gives (a graph per
    loaded program, a run per execution); a run started twice (two ops of one library in one
    program both say so) counts once."""

    __slots__ = ("_graphs", "_graph", "_run", "_calls", "_started")

    #: Graphs remembered at most (a process that loads many programs forgets them all and learns again).
    KEPT = 256

    def __init__(self) -> None:
        self._graphs: dict[int, tuple[int, float | None]] = {}  # graph -> (calls of its latest run, lead)
        self._graph: int | None = None
        self._run = -1
        self._calls = 0
        self._started = 0.0

    def start(self, graph: int, run: int, now: float) -> bool:
        """Run `run` of `graph` starts at `now`; False when it had started already."""
        if run == self._run:
            return False
        self._close()
        self._graph, self._run, self._calls, self._started = graph, run, 0, now
        return True

    def _close(self) -> None:
        if self._graph is not None:
            self._keep(self._graph, self._calls, self._graphs.get(self._graph, (0, None))[1])

    def _keep(self, graph: int, calls: int, lead: float | None) -> None:
        if len(self._graphs) >= self.KEPT and graph not in self._graphs:
            self._graphs.clear()
        self._graphs[graph] = (calls, lead)

    def window(self) -> float:
        """The prime's poll for the run started last (`prime_window` of its graph's lead)."""
        return prime_window(self._graphs.get(self._graph, (0, None))[1]) if self._graph is not None else 0.0

    def call(self, now: float) -> bool:
        """A call is made at `now`: whether the run has more to make (its graph's previous run made
        more than this run so far); False outside runs."""
        if self._graph is None:
            return False
        self._calls += 1
        calls = self._graphs.get(self._graph, (0, None))[0]
        if self._calls == 1:
            self._keep(self._graph, calls, now - self._started)
        return self._calls < calls


def shares_cpu(words: memoryview, word: int, cpu: int) -> bool:
    """Whether the other side's CPU in page word `word` (5: the host's, 26: the worker's) is
    `cpu`, this side's own: then polling would hold the CPU the other side needs. Why it
    happens: the scheduler wakes a process that a pipe write woke on the writer's CPU and
    keeps a task that ran within the last half millisecond where it is, so host and worker
    can stay on one CPU for thousands of calls (session 10: 4000 of 4000 at load 3.9), each
    poll then delaying the other side's next step by its full length."""
    return cpu >= 0 and words[word] == cpu


class HostWaits:
    """How the host waited for its calls' replies, counted since the worker started
    (diagnostics: benchmarks/gpsimd_call.py prints them beside the worker's own, words 13-15)."""

    __slots__ = ("calls", "slept", "woke", "rewoke", "primed")

    def __init__(self) -> None:
        self.calls = 0  # prepared calls made
        self.slept = 0  # of them, answered only after the host slept on its pipe
        self.woke = 0  # of them, found the worker asleep (a wake token was written)
        self.rewoke = 0  # wake tokens written again after a slice: lost wake-ups
        self.primed = 0  # graph runs at whose start the host woke the worker for the first call


def involuntary_switches() -> int:
    """How many times another task has taken this thread's CPU so far (its involuntary context
    switches), or -1 where the system does not say."""
    try:
        return resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw
    except (AttributeError, OSError):
        return -1


class Spinner:
    """Bounded polling of one side for a page word, which gives up when the machine is busy.

    Polling pays while both processes have a CPU. When other processes compete for the CPUs, a
    poller is preempted in the middle of its poll, and a process that polled through its share
    waits a whole time slice for the next one, where a process woken from sleep runs at once
    (the scheduler credits sleepers): on a 2-core machine at load 4, polling made calls 3-8
    times slower than sleeping. So a poll that finds it was preempted stops, and this side
    sleeps without polling for a while: `BACKOFF_FIRST`, doubled by each further preempted
    poll up to `BACKOFF`, halved by each poll that was not.

    Preempted means two looks at the clock more than `PREEMPTED` apart *and* an involuntary
    context switch of this thread since the last such gap: another task took the CPU. A gap
    without one is a stall of the virtual CPU itself (the hypervisor, an interrupt): no process
    of this machine wanted the CPU, so polling on costs nobody, where backing off would make the
    next calls pay two wake-ups each (tens of microseconds each on an idle virtual machine).
    Those are counted as `stalls`."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self._quiet_from = 0.0
        self._switches = -1  # involuntary_switches() at the latest gap (-1: none seen yet)
        self._backoff = BACKOFF_FIRST  # the next back-off
        self.preempted = 0  # polls stopped as preempted (diagnostics)
        self.stalls = 0  # gaps without a context switch, polled through (diagnostics)

    def _contended(self) -> bool:
        """Whether another task took this thread's CPU since the previous gap (the first gap,
        or a system that does not say, counts as taken)."""
        switches = involuntary_switches()
        contended = switches < 0 or switches != self._switches
        self._switches = switches
        return contended

    def poll(self, words: memoryview, word: int, value: int, limit: float | None = None) -> bool:
        """Whether words[word] == value within the limit (no sleeping; a system call only after a
        gap between two looks at the clock)."""
        if words[word] == value:
            return True
        now = time.monotonic()
        if now < self._quiet_from:
            return False
        end = now + (self.limit if limit is None else min(limit, self.limit))
        last = now
        while True:
            if words[word] == value:
                break
            now = time.monotonic()
            if now - last > PREEMPTED:
                if self._contended():
                    self._quiet_from = now + self._backoff
                    self._backoff = min(BACKOFF, 2 * self._backoff)
                    self.preempted += 1
                    return words[word] == value
                self.stalls += 1
            if now >= end:
                break
            last = now
        self._backoff = max(BACKOFF_FIRST, self._backoff / 2)
        return words[word] == value


def create() -> tuple[int, ControlPage]:
    """A new control page in an anonymous memfd: (its descriptor, the host's mapping)."""
    fd = os.memfd_create("ncc-gpsimd-control", os.MFD_CLOEXEC)
    os.ftruncate(fd, SIZE)
    page = ControlPage(fd)
    page.words[HOST_CPU] = page.words[WORKER_CPU] = -1  # not known yet (0 is a CPU)
    return fd, page
