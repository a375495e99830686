"""The profiling variant of a computation's run loop.

Why a separate loop: the plain loop (emulator.executor._make_runner) stays exactly as fast when
nobody profiles; a program loaded for profiling binds this one instead. Per instruction it
times the handler, asks the instruction's coster for its cycles and schedules them.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from emulator.cost.engines import Cost
from emulator.profile.recorder import HostSpan, Recorder

#: (bound handler, operand slots, out slot, freed slots, coster, name, op, shapes, source line)
ProfiledStep = tuple[Callable[[list[Any]], Any], tuple[int, ...], int, tuple[int, ...],
                     Callable[[], Cost], str, str, str, str]


def make_profiled_runner(num_slots: int, params: tuple[int, ...], result: int, steps: list[ProfiledStep],
                         recorder: Recorder, on_error: Callable[[int, Exception], Exception]) -> Callable[..., Any]:
    """A run function recording every executed instruction into `recorder`."""
    clock = time.perf_counter

    def run(*args: Any) -> Any:
        regs: list[Any] = [None] * num_slots
        ready = [0.0] * num_slots
        base = recorder.call_ready
        for p, a in zip(params, args):
            regs[p] = a
            ready[p] = base
        depth = recorder.depth
        recorder.depth = depth + 1
        k = 0
        try:
            for call, ins, out, free, coster, name, op, shapes, source in steps:
                t_ready = max((ready[i] for i in ins), default=base)
                recorder.call_ready = t_ready
                mark = len(recorder.events)
                t0 = clock()
                regs[out] = call(regs)
                t1 = clock()
                recorder.host.append(HostSpan(name, op, t0 - recorder.origin, t1 - t0, depth, source))
                nested = max((e.end for e in recorder.events[mark:]), default=t_ready)
                done = recorder.schedule(name, op, coster(), max(t_ready, nested) if op in _CONTROL else t_ready,
                                         shapes, source)
                ready[out] = max(done, nested)
                for f in free:
                    regs[f] = None
                k += 1
        except Exception as e:
            raise on_error(k, e) from e
        finally:
            recorder.depth = depth
        return regs[result]

    return run


#: Ops whose own (zero-cost) event sits after the events of the bodies they ran.
_CONTROL = frozenset({"while", "conditional", "call"})
