"""Control flow as sub-programs: while (cond/body computations), conditional (by pred or index;
an out-of-range index picks the last branch, as XLA does), call, map (a lifted computation) and
scan (the computation once per element along the scanned dimension, carrying values).

A while loop that runs longer than NEURON_EMULATOR_WHILE_TIMEOUT seconds is stopped with an
EmulatorError (emulator.limits): `while(true)` from a forged or buggy module must not hang the
process. The clock is read after every 256 iterations, run by a C-level `for` over a range, so
an iteration costs no Python counter arithmetic. A loop over a tuple state runs as one generated
function (emulator.codegen: condition and body inlined, loop invariants hoisted); profiled and
type-checked runs keep the two computations separate, so each instruction is seen."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from emulator.codegen import LOOP_CHUNK
from emulator.errors import EmulatorError
from emulator.limits import WHILE_TIMEOUT_ENV, while_timeout
from emulator.program.context import HandlerContext
from emulator.program.dtypes import DTYPES, TUPLE
from emulator.program.ops import handles

_CHUNK = range(LOOP_CHUNK)  # iterations between clock reads


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
    body_comp = ctx.program.program.computations[ctx.attrs["body"]]
    in_place = any(i.op == "dynamic-update-slice" and i.reuse == 0 for i in body_comp.instructions)
    limit, name = while_timeout(), ctx.name

    def overdue(start: float, chunks: int) -> None:
        if time.monotonic() - start > limit:
            raise EmulatorError(f"while loop {name!r} still running after {chunks * len(_CHUNK)} iterations and "
                                f"{limit:g} s ({WHILE_TIMEOUT_ENV}); its condition may never become false")

    state_type = ctx.in_types[0]
    if getattr(ctx.program, "plain", False) and state_type[0] == TUPLE:
        # the usual case: one generated function for the whole loop (emulator.codegen)
        own = (lambda state, always: _own_state(state, set(), always)) if in_place else None
        return ctx.program.loop_runner(ctx.attrs["cond"], ctx.attrs["body"], len(state_type[1]), overdue, own)
    cond, body = ctx.computation("cond"), ctx.computation("body")

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


@handles("scan")
def _scan(ctx: HandlerContext) -> Callable:
    """XLA's scan: inputs are sliced along `dim` (from the end when `reverse`), the computation
    takes (input elements..., carries...) and returns (outputs..., new carries...); each output
    element is written at its input's position, and the result is (stacked outputs..., final
    carries...). The result types come from the program, so outputs are allocated once."""
    body = ctx.computation("computation")
    dim, carries, reverse = ctx.attrs["dim"], ctx.attrs["num_carries"], ctx.attrs["reverse"]
    leaves = ctx.type[1] if ctx.type[0] == "tuple" else [ctx.type]
    n_out = len(leaves) - carries
    out_types = [(DTYPES[t[0]], tuple(t[1])) for t in leaves[:n_out]]
    n_in = len(ctx.in_types) - carries
    if n_in:
        length = ctx.in_shape(0)[dim]
    elif n_out:
        length = out_types[0][1][dim]
    else:
        raise EmulatorError(f"scan {ctx.name!r} has neither inputs nor outputs to give it a length")
    order = range(length - 1, -1, -1) if reverse else range(length)
    tuple_result = ctx.type[0] == "tuple"

    def scan(*operands: Any) -> Any:
        inputs = [np.moveaxis(np.asarray(x), dim, 0) for x in operands[:n_in]]
        state = list(operands[n_in:])
        outs = [np.empty(shape, dt) for dt, shape in out_types]
        views = [np.moveaxis(o, dim, 0) for o in outs]
        for t in order:
            got = body(*(x[t] for x in inputs), *state)
            got = list(got) if isinstance(got, tuple) else [got]
            for view, value in zip(views, got[:n_out]):
                view[t] = value
            state = got[n_out:]
        result = outs + state
        return tuple(result) if tuple_result else result[0]
    return scan
