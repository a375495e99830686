"""Control flow as sub-programs: while (cond/body computations), conditional (by pred or index;
an out-of-range index picks the last branch, as XLA does), call, map (a lifted computation), and
the placeholder for kernel payloads."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from emulator.executor import EmulatorError, Factory, HandlerContext


def _while(ctx: HandlerContext) -> Callable:
    cond, body = ctx.computation("cond"), ctx.computation("body")

    def loop(state: Any) -> Any:
        while bool(cond(state)):
            state = body(state)
        return state
    return loop


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


def _call(ctx: HandlerContext) -> Callable:
    return ctx.computation("computation")


def _map(ctx: HandlerContext) -> Callable:
    f, dt, shape = ctx.computation("computation"), ctx.dtype, ctx.shape
    return lambda *xs: np.broadcast_to(np.asarray(f(*xs)).astype(dt, copy=False), shape)


def _kernel(ctx: HandlerContext) -> Callable:
    payload = ctx.attrs["payload"]

    def run(*args: Any) -> Any:
        raise EmulatorError(f"kernel payloads are not supported yet (payload {payload})")
    return run


HANDLERS: dict[str, Factory] = {
    "while": _while, "conditional": _conditional, "call": _call, "map": _map, "kernel": _kernel,
}
