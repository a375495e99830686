"""Running data-dependent loops (emulator/kernel_ir/control.py): one runner per loop form.

Their trip count is data, so they can not become a batch axis: the body runs once per iteration,
each iteration on whole tiles as usual (its inner static loops may still be vectorised). A
register's value is one number per program, so the analysis (program.py) runs a kernel that has
such a loop one program at a time, and the loops around it as Python loops: when a data-dependent
loop starts, the context has no batch axes and every register holds exactly one value.

The running iteration's number is ``ctx.iterations[loop.var]`` (not an index symbol): random
draws in the body mix it in, so each iteration draws new numbers, as the engines' generators
advance.

Each run of a loop may make at most ``NEURON_EMULATOR_MAX_KERNEL_LOOP_ITERATIONS`` iterations
(emulator/limits.py); more is a ``KernelRuntimeError`` naming the kernel, the loop's source line
and the setting, instead of a run that never ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from emulator import limits
from emulator.kernel_ir import DATA_DEPENDENT_LOOPS, DYNAMIC_LOOP, WHILE_LOOP, Const, Loop, Operand

from .errors import KernelRuntimeError

if TYPE_CHECKING:  # the runner imports this table
    from .runner import Runner

LoopRunner = Callable[["Runner", Loop], None]


def _error(r: Runner, loop: Loop, rule: str, detail: str) -> KernelRuntimeError:
    return KernelRuntimeError(r.kernel.name, loop.loc, rule, detail)


def register_value(r: Runner, loop: Loop, op: Operand, what: str) -> int:
    """The integer a loop operand holds now: a constant, or the one value of a register."""
    if isinstance(op, Const):
        return int(op.value)
    if r.ctx.batch_shape:
        raise _error(r, loop, "data-dependent loop in a vectorised context",
                     f"the {what} register {op.tensor!r} holds one value per program and "
                     f"iteration of {list(r.ctx.batch_syms)}; the analysis should have run them "
                     "one at a time (an emulator bug)")
    r.instruction = None  # a read error names the loop, not the last instruction run
    try:
        value = np.asarray(r.read(op)).reshape(-1)
    except KernelRuntimeError as e:
        raise _error(r, loop, f"{loop.kind} loop {what}", str(e)) from e
    return int(value[0])


def _too_many(r: Runner, loop: Loop, limit: int, what: str) -> KernelRuntimeError:
    return _error(r, loop, "loop iteration limit",
                  f"{what} exceeds {limit} iterations ({limits.MAX_KERNEL_LOOP_ENV}; raise it "
                  "if the loop is meant to run that long)")


def run_dynamic(r: Runner, loop: Loop) -> None:
    """``for index in range(start, stop, step)``, the bounds read once when the loop starts;
    each iteration first writes its value into the ``index`` register."""
    _, start, stop = loop.operands
    lo = register_value(r, loop, start, "start")
    hi = register_value(r, loop, stop, "stop")
    values = range(lo, hi, loop.step)
    limit = limits.max_kernel_loop_iterations()
    if len(values) > limit:
        raise _too_many(r, loop, limit, f"dynamic_range({lo}, {hi}, {loop.step}) "
                        f"({len(values)} iterations)")
    index = r.program.loop_index.get(id(loop))  # None: nothing reads the index register
    its = r.ctx.iterations
    try:
        for k, i in enumerate(values):
            its[loop.var] = k
            if index is not None:
                r.write_register(index, i)
            r.run_body(loop.body)
    finally:
        its.pop(loop.var, None)


def run_while(r: Runner, loop: Loop) -> None:
    """``while cond != 0: body``, the register read before every iteration."""
    (cond,) = loop.operands
    limit = limits.max_kernel_loop_iterations()
    n = 0
    its = r.ctx.iterations
    try:
        while register_value(r, loop, cond, "condition") != 0:
            if n == limit:
                raise _too_many(r, loop, limit, f"while loop on register {cond.tensor!r}"
                                if not isinstance(cond, Const) else "while loop")
            its[loop.var] = n
            r.run_body(loop.body)
            n += 1
    finally:
        its.pop(loop.var, None)


#: Loop kind -> how it runs (the data-dependent forms; static loops are the runner's own).
RUNNERS: dict[str, LoopRunner] = {DYNAMIC_LOOP: run_dynamic, WHILE_LOOP: run_while}
if set(RUNNERS) != set(DATA_DEPENDENT_LOOPS):
    raise ImportError(f"data-dependent loop forms without a runner: "
                      f"{sorted(set(DATA_DEPENDENT_LOOPS) - set(RUNNERS))}")
