"""Beta 2's on-device loops: ``nl.dynamic_range``, ``nl.fori_loop`` and ``nl.while_loop``.

With bounds known while tracing, ``dynamic_range``/``fori_loop`` are sequential IR loops whose
variable is an index expression (usable in subscripts, like a ``sequential_range`` variable).
With a ``VirtualRegister`` bound (``nisa.register_alloc``/``register_load``: a value computed
on the device) they become the kernel IR's data-dependent ``dynamic`` loop, and ``while_loop``
its ``while`` loop (emulator/kernel_ir/control.py): the body is traced once and run once per
iteration, and the loop variable is a register, as the reference says ("the loop variable is a
device register, not a Python int").
"""

from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

from emulator.kernel_ir import DYNAMIC_LOOP, WHILE_LOOP

from ..registers import VirtualRegister, new_register
from ..tracer import current, current_or_none
from .spmd import _Range


def _bound(api: str, v, what: str):
    """A loop bound: an int known while tracing, or a register (its tile)."""
    if isinstance(v, VirtualRegister):
        return v.tile
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return int(v)
    raise _error(api, f"{what} must be an int or a VirtualRegister (nisa.register_alloc), got "
                 f"{type(v).__name__}")


def _error(api: str, detail: str) -> Exception:
    tr = current_or_none()
    if tr is None:
        return TypeError(f"nki.language.{api}: {detail}")
    return tr.error(f"{api} operand", f"nki.language.{api}: {detail}")


def _step(api: str, step) -> int:
    """The step: a positive int known while tracing (the hardware loop encodes it as an
    immediate; a register is refused, as the reference's AssertionError does)."""
    if isinstance(step, VirtualRegister) or not isinstance(step, (int, np.integer)) \
            or isinstance(step, bool) or int(step) < 1:
        raise _error(api, f"step must be a positive int known while tracing, got {step!r}")
    return int(step)


class _DynamicRange:
    """``range(start, stop, step)`` with a register bound: one data-dependent IR loop whose
    variable is the loop's index register."""

    def __init__(self, start, stop, step: int):
        self.bounds = (start, stop)
        self.step = step

    def __iter__(self) -> Iterator[VirtualRegister]:
        tr = current()
        index = new_register()
        node = tr.open_loop(DYNAMIC_LOOP, (index.tile, *self.bounds), self.step)
        try:
            yield index
        finally:
            if tr.innermost_loop() is node:
                tr.close_loop(node)


def dynamic_range(start, stop=None, step=1):
    """A loop that runs on the device; with a register bound its trip count is data."""
    st = _step("dynamic_range", step)
    lo, hi = (0, start) if stop is None else (start, stop)
    lo, hi = _bound("dynamic_range", lo, "start"), _bound("dynamic_range", hi, "stop")
    if isinstance(lo, int) and isinstance(hi, int):
        return _Range((lo, hi, st), "sequential")
    if current_or_none() is None:
        raise _error("dynamic_range", "a register bound exists only inside a kernel")
    return _DynamicRange(lo, hi, st)


def fori_loop(lower, upper, body_fun: Callable, step=1) -> None:
    """``for i in range(lower, upper, step): body_fun(i)`` as one IR loop: sequential with
    bounds known while tracing (``i`` an index expression), data-dependent with a register bound
    (``i`` the loop's index register; writing it does not change the iteration)."""
    for i in dynamic_range(lower, upper, step):
        body_fun(i)


def while_loop(init, body_fun: Callable) -> None:
    """``r = init; while r != 0: r = body_fun(r)``: the condition is read before each iteration
    (the body never runs when ``init`` is 0). The body gets the condition register by value (a
    copy of ``init``, so ``init`` keeps its value) and returns the next one."""
    if not isinstance(init, VirtualRegister):
        raise _error("while_loop", f"init must be a VirtualRegister (nisa.register_alloc), got "
                     f"{type(init).__name__}")
    tr = current()
    cond = new_register()
    tr.emit("tensor_copy", cond.tile, init.tile)
    node = tr.open_loop(WHILE_LOOP, (cond.tile,))
    try:
        nxt = body_fun(cond)
        if not isinstance(nxt, VirtualRegister):
            raise _error("while_loop", f"body_fun returns the next condition register, got "
                         f"{type(nxt).__name__}")
        if nxt.tile.name != cond.tile.name:
            tr.emit("tensor_copy", cond.tile, nxt.tile)
    finally:
        if tr.innermost_loop() is node:
            tr.close_loop(node)


__all__ = ["dynamic_range", "fori_loop", "while_loop"]
