"""Control flow as sub-programs: while (cond/body computations), conditional (by pred or index;
an out-of-range index picks the last branch, as XLA does), call and map (a lifted computation).

A while loop that runs longer than NEURON_EMULATOR_WHILE_TIMEOUT seconds is stopped with an
EmulatorError (emulator.limits): `while(true)` from a forged or buggy module must not hang the
process. The clock is read after every 256 iterations, run by a C-level `for` over a range, so
an iteration costs no Python counter arithmetic."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from emulator.errors import EmulatorError
from emulator.limits import WHILE_TIMEOUT_ENV, while_timeout
from emulator.program.context import HandlerContext
from emulator.program.ops import handles

_CHUNK = range(256)  # iterations between clock reads


def _own_state(state: Any, seen: set[int], always: bool) -> Any:
    """The loop state with every array leaf owned by the loop: a writeable array owning its data
    and appearing once (copied if not, or always on entry, so user and constant arrays are never
    written). The body's in-place dynamic-update-slices rely on it."""
    if isinstance(state, tuple):
        return tuple(_own_state(v, seen, always) for v in state)
    if isinstance(state, np.ndarray):
        if always or not (state.flags.writeable and state.flags.owndata) or id(state) in seen:
            state = np.array(state, copy=True)
        seen.add(id(state))
    return state


@handles("while")
def _while(ctx: HandlerContext) -> Callable:
    cond, body = ctx.computation("cond"), ctx.computation("body")
    body_comp = ctx.program.program.computations[ctx.attrs["body"]]
    in_place = any(i.op == "dynamic-update-slice" and i.reuse == 0 for i in body_comp.instructions)
    limit, name = while_timeout(), ctx.name

    def overdue(start: float, chunks: int) -> None:
        if time.monotonic() - start > limit:
            raise EmulatorError(f"while loop {name!r} still running after {chunks * len(_CHUNK)} iterations and "
                                f"{limit:g} s ({WHILE_TIMEOUT_ENV}); its condition may never become false")

    def loop(state: Any) -> Any:
        start, chunks = time.monotonic(), 0
        while True:
            for _ in _CHUNK:
                if not cond(state):
                    return state
                state = body(state)
            chunks += 1
            overdue(start, chunks)

    def owning_loop(state: Any) -> Any:
        start, chunks = time.monotonic(), 0
        state = _own_state(state, set(), True)
        while True:
            for _ in _CHUNK:
                if not cond(state):
                    return state
                state = _own_state(body(state), set(), False)
            chunks += 1
            overdue(start, chunks)
    return owning_loop if in_place else loop


@handles("conditional")
def _conditional(ctx: HandlerContext) -> Callable:
    branches = [ctx.program.runner(b) for b in ctx.attrs["branches"]]
    if ctx.attrs["by_index"]:
        last = len(branches) - 1

        def by_index(i: Any, *args: Any) -> Any:
            k = int(i)
            if not 0 <= k <= last:
                k = last
            return branches[k](args[k])
        return by_index
    if len(branches) != 2:
        raise ValueError("a predicated conditional has two branches")
    t, f = branches

    def by_pred(p: Any, a: Any, b: Any) -> Any:
        return t(a) if bool(p) else f(b)
    return by_pred


@handles("call")
def _call(ctx: HandlerContext) -> Callable:
    return ctx.computation("computation")


@handles("map")
def _map(ctx: HandlerContext) -> Callable:
    f, dt, shape = ctx.computation("computation"), ctx.dtype, ctx.shape
    return lambda *xs: np.broadcast_to(np.asarray(f(*xs)).astype(dt, copy=False), shape)
